"""The deployment files (deploy/): the systemd unit's and the compose file's command lines are valid
`pategail` command lines that fit together, and the image definition copies files that exist and installs
the two distributions (the SDK first, as `make setup`). Docker itself is not run here."""
from __future__ import annotations

import configparser
import json
import re
import shlex

import pytest

from pategail.cli import build_parser

from .conftest import ROOT

DEPLOY = ROOT / "deploy"


def _parse(argv):
    args = build_parser().parse_args(argv)
    return args


def test_the_systemd_unit_runs_a_valid_serve_command():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read(DEPLOY / "pategail-serve.service")
    argv = shlex.split(unit["Service"]["ExecStart"])
    assert argv[0].endswith("/bin/pategail")
    args = _parse(argv[1:])
    assert args.func.__name__ == "run_serve" and args.resume_if_any and args.host == "0.0.0.0"
    assert args.tls_cert is not None and args.tls_key is not None and not args.open_enrolment
    assert set(unit["Service"]["RestartPreventExitStatus"].split()) == {"2", "3", "4"}


def test_the_compose_files_coordinator_and_devices_fit_together():
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    serve = _parse(compose["services"]["coordinator"]["command"])
    emulate = _parse(compose["services"]["devices"]["command"])
    assert serve.func.__name__ == "run_serve" and emulate.func.__name__ == "run_emulate"
    assert emulate.devices == serve.min_devices
    assert str(emulate.tokens) == f"{serve.out}/enrol-tokens.txt"          # the tokens serve issues
    assert emulate.server == f"http://coordinator:{serve.port}"
    assert compose["services"]["coordinator"]["ports"] == [f"127.0.0.1:{serve.port}:{serve.port}"]


def test_the_image_copies_what_exists_and_installs_every_distribution():
    text = (DEPLOY / "Dockerfile").read_text()
    for line in re.findall(r"^COPY (.+)$", text, re.M):
        *sources, _ = line.split()
        for source in sources:
            assert (ROOT / source).exists(), source
    installs = re.findall(r"^RUN pip install (.+)$", text, re.M)
    # each after those it depends on: pategail-sdk, -server, -export, -research, then pategail (the command line)
    assert installs == ["./sdk", "./server", "./export", "./research", "."]
    cmd = json.loads(re.search(r"^CMD (.+)$", text, re.M).group(1))
    args = _parse(cmd)
    assert args.func.__name__ == "run_serve" and args.resume_if_any and str(args.out).startswith("/srv/pategail")
    assert re.search(r'^ENTRYPOINT \["pategail"\]$', text, re.M)
