plugins {
    id("com.android.application")
    id("org.jetbrains.kotlin.android")
}

android {
    namespace = "org.pategail.app"
    compileSdk = 34

    defaultConfig {
        applicationId = "org.pategail.app"
        minSdk = 26
        targetSdk = 34
        versionCode = 1
        versionName = "0.1.0"
        testInstrumentationRunner = "androidx.test.runner.AndroidJUnitRunner"
        // the served run: where RoundWorker reaches the service (pategail serve), and the coordinator's Ed25519
        // key (hex) the app pins (empty: trust the key of the first enrolment answer); the id comes from enrolment
        buildConfigField("String", "COORDINATOR_URL", "\"${project.findProperty("pategail.coordinatorUrl") ?: "https://coordinator.invalid"}\"")
        buildConfigField("String", "COORDINATOR_KEY", "\"${project.findProperty("pategail.coordinatorKey") ?: ""}\"")
    }

    buildFeatures {
        buildConfig = true
    }

    buildTypes {
        release {
            isMinifyEnabled = false
        }
    }

    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }

    kotlinOptions {
        jvmTarget = "17"
    }

    sourceSets {
        // the instrumented test replays the cross-language vectors (and their bundle) on the phone
        getByName("androidTest").assets.srcDirs("../../vectors")
    }

    packaging {
        resources.excludes += "META-INF/versions/9/OSGI-INF/MANIFEST.MF"
    }
}

dependencies {
    implementation(project(":core"))
    implementation("com.microsoft.onnxruntime:onnxruntime-training-android:1.19.2")
    implementation("androidx.work:work-runtime-ktx:2.9.1")
    implementation("androidx.appcompat:appcompat:1.7.0")
    implementation("androidx.core:core-ktx:1.13.1")
    androidTestImplementation("androidx.test.ext:junit:1.2.1")
    androidTestImplementation("androidx.test:runner:1.6.2")
}
