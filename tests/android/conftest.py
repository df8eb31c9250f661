"""Fixtures of the Android demo's checks: the Java core compiled once (javac from OpenJDK, BouncyCastle and
org.json from Debian's libbcprov-java and libandroid-json-org-java, JUnit 5 from junit5), the committed
test vectors and bundle, and the embedded data set. Without the tools the tests skip in one line."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "android-demo"
CORE = DEMO / "core"
VECTORS = DEMO / "vectors"
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""For the tests' short-lived JVMs: the client compiler alone and the serial collector spend a fifth less CPU
(the served fleet's three runs: 66 → 51 s, 2026-11-29) for the same results (Java's floating point is strict)."""
JAVA = ("java", *JVM_OPTIONS)


def load_module(relative: str):
    """The module at ``relative`` (to the repository) — another test directory's helpers, which are no package."""
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_")[:-3], ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compiled(tmp_path_factory, config, with_tests: bool) -> Path:
    """The core (and its tests) compiled once for the whole session: the first test worker to need them runs
    javac while the others wait on a lock, then all share the classes."""
    import fcntl

    from pategail.jvm_device import compile_core

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if hasattr(config, "workerinput") else base      # an xdist worker's: the workers' common one
    out = shared / ("java-classes-tests" if with_tests else "java-classes")
    with open(shared / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "compiled").exists():
            compile_core(out, with_tests=with_tests)
            (out / "compiled").touch()
    return out


def _classpath(classes: Path) -> str:
    """Classpath that runs the core from ``classes``: the compiled classes, BouncyCastle, org.json."""
    from pategail.jvm_device import JARS

    return ":".join([str(classes), *(str(j) for j in JARS.values())])


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory, pytestconfig) -> Path:
    """The core's main and test classes, compiled for Java 11 (Android's desugared level) into a temp dir."""
    from pategail.jvm_device import java_missing

    reason = java_missing(with_junit=True)
    if reason:
        pytest.skip(f"Java checks skipped: {reason}")
    return _compiled(tmp_path_factory, pytestconfig, with_tests=True)


@pytest.fixture(scope="session")
def java_classpath(java_classes) -> str:
    """Classpath that runs the core (no JUnit): compiled classes, BouncyCastle, org.json."""
    return _classpath(java_classes)


@pytest.fixture(scope="session")
def java_device_classpath(tmp_path_factory, pytestconfig) -> str:
    """Classpath of the core alone (no JUnit needed), for the Java device processes of served runs."""
    from pategail.jvm_device import java_missing

    reason = java_missing()
    if reason:
        pytest.skip(f"Java device checks skipped: {reason}")
    return _classpath(_compiled(tmp_path_factory, pytestconfig, with_tests=False))


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
