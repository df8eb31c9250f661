"""Fixtures of the network tests: the embedded data prepared once, a tiny training configuration, and
processes started in their own process groups, killed (the whole group) when the test ends."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pategail.server.config import merge_settings
from tests.forked import Child

ROOT = Path(__file__).resolve().parents[2]
TINY = {"days_per_round": 6, "discriminator": {"steps": 2, "batch_size": 16}, "environment": {"candidates": 50, "action_prior_days": 16, "action_prior_epochs": 2}, "policy": {"d_model": 16, "n_layers": 1}, "ppo": {"n_epochs": 2, "batch_size": 3}}


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    from pategail.data.prepare import prepare_dataset

    out = tmp_path_factory.mktemp("net-data") / "data"
    prepare_dataset("pategail", ROOT / "data" / "default", out, allow_pickle=True)
    return out


@pytest.fixture(scope="session")
def dataset(data_dir):
    from pategail.data.dataset import load_dataset
    return load_dataset(data_dir)


def tiny_config(path: Path, **overrides) -> Path:
    path.write_text(json.dumps(merge_settings(TINY, overrides)))
    return path


class Processes:
    """``python -m pategail ARGS`` processes, each in its own session (process group), its output in a log named
    after it; every group is killed at the end of the test. Forked from a server that imported the heavy
    libraries once (tests/forked.py): a served run starts a handful of them."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.started: list[Child] = []

    def start(self, name: str, *args: str) -> Child:
        proc = Child(["-m", "pategail", *args], cwd=self.logs, stdout=self.logs / f"{name}.log", append=True,
                     session=True)
        proc.log_path = self.logs / f"{name}.log"
        self.started.append(proc)
        return proc

    @staticmethod
    def kill(proc: Child) -> None:
        proc.kill_group()

    def close(self) -> None:
        for proc in self.started:
            self.kill(proc)


@pytest.fixture
def processes(tmp_path):
    procs = Processes(tmp_path)
    yield procs
    procs.close()


def wait_for(predicate, timeout: float, what: str, procs: list = ()):
    """Poll ``predicate`` until it returns a true value; fail after ``timeout`` seconds (with the logs of
    ``procs``) or when one of ``procs`` exits early."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"{p.args[3:5]} exited ({p.returncode}) while waiting for {what}:\n"
                            + p.log_path.read_text()[-3000:])
        time.sleep(0.1)
    logs = "\n".join(p.log_path.read_text()[-2000:] for p in procs)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}\n{logs}")


def service_url(run: Path) -> str | None:
    path = run / "service.url"
    return path.read_text().strip() if path.is_file() else None


def status(url: str) -> dict | None:
    import urllib.request
    try:
        with urllib.request.urlopen(url + "/status", timeout=5) as r:
            return json.loads(r.read())
    except OSError:
        return None
