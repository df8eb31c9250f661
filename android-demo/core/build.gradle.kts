// The device core as a plain Java library (Java 11 API level, which Android's D8 desugars for minSdk 26).
// Here it is built by android-demo/app's Gradle; on this project's CI it is compiled with javac and tested
// through pytest (tests/android), without Gradle.
plugins {
    `java-library`
}

java {
    sourceCompatibility = JavaVersion.VERSION_11
    targetCompatibility = JavaVersion.VERSION_11
}

sourceSets {
    main {
        java {
            // JVM tools, not part of what a phone runs: a pipe device (java.lang.management), the command line and
            // the policy trainer that runs ONNX Runtime in a child process (a phone has OrtPolicyTrainer)
            exclude("org/pategail/core/tools/StdioDevice.java", "org/pategail/core/tools/NetDevice.java",
                    "org/pategail/core/tools/ProcessPolicyTrainer.java")
        }
    }
}

dependencies {
    // the lightweight API (X25519, Ed25519, HKDF) runs on Android; the platform's JCA has no X25519 below API 33
    api("org.bouncycastle:bcprov-jdk18on:1.72")
    // Android has org.json built in; this jar is its API for compiling and for JVM tests
    compileOnly("com.vaadin.external.google:android-json:0.0.20131108.vaadin1")
    testImplementation("com.vaadin.external.google:android-json:0.0.20131108.vaadin1")
    testImplementation("org.junit.jupiter:junit-jupiter:5.9.2")
    testRuntimeOnly("org.junit.platform:junit-platform-launcher:1.9.2")
}

tasks.test {
    useJUnitPlatform()
    systemProperty("pategail.vectors", file("../vectors").absolutePath)
}
