// The PateGail device SDK in a phone app. Build: see android-demo/README.md.
pluginManagement {
    repositories {
        google()
        mavenCentral()
        gradlePluginPortal()
    }
}

dependencyResolutionManagement {
    repositoriesMode.set(RepositoriesMode.FAIL_ON_PROJECT_REPOS)
    repositories {
        google()
        mavenCentral()
    }
}

rootProject.name = "pategail-android"
include(":core", ":phone")
// the plain-Java core tested on the JVM (android-demo/core) is the very code the app runs
project(":core").projectDir = file("../core")
