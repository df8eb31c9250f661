"""Fixtures of the Android demo's checks: the Java core compiled once (javac from OpenJDK, BouncyCastle and
org.json from Debian's libbcprov-java and libandroid-json-org-java, JUnit 5 from junit5), the committed
test vectors and bundle, and the embedded data set. Without the tools the tests skip in one line."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "android-demo"
CORE = DEMO / "core"
VECTORS = DEMO / "vectors"
JARS = {"BouncyCastle (libbcprov-java)": Path("/usr/share/java/bcprov.jar"),
        "org.json (libandroid-json-org-java)": Path("/usr/share/java/json-android.jar")}
JUNIT = Path("/usr/share/java/junit-platform-console-standalone.jar")


def java_missing() -> str | None:
    """Why the Java checks cannot run here, or None."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH (apt-get install openjdk-17-jdk-headless)"
    for name, jar in {**JARS, "JUnit 5 (junit5)": JUNIT}.items():
        if not jar.is_file():
            return f"{jar} missing: install {name}"
    return None


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory) -> Path:
    """The core's main and test classes, compiled for Java 11 (Android's desugared level) into a temp dir."""
    reason = java_missing()
    if reason:
        pytest.skip(f"Java checks skipped: {reason}")
    out = tmp_path_factory.mktemp("java-classes")
    sources = sorted(str(p) for p in (CORE / "src").rglob("*.java"))
    cp = ":".join(str(j) for j in [*JARS.values(), JUNIT])
    done = subprocess.run(["javac", "--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp", cp, "-d", str(out),
                           *sources], capture_output=True, text=True)
    assert done.returncode == 0, f"javac failed:\n{done.stdout}{done.stderr}"
    return out


@pytest.fixture(scope="session")
def java_classpath(java_classes) -> str:
    """Classpath that runs the core (no JUnit): compiled classes, BouncyCastle, org.json."""
    return ":".join([str(java_classes), *(str(j) for j in JARS.values())])


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    """The embedded data set (data/default), prepared."""
    from pategail.data.dataset import load_dataset
    from pategail.data.prepare import prepare_dataset

    src = ROOT / "data" / "default"
    if not src.is_dir():
        pytest.skip(f"embedded development data not found at {src}")
    out = tmp_path_factory.mktemp("android-data") / "data"
    prepare_dataset("pategail", src, out, allow_pickle=True)
    return load_dataset(out)
