"""`pategail device` and `pategail emulate`: where a device's days come from, and one-line errors for user
mistakes (exit 2, no traceback)."""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from pategail.cli import main


def test_days_come_from_a_synthetic_csv_or_a_data_set_user(tmp_path, dataset, data_dir):
    from pategail.data.dataset import load_user_days
    from pategail.sdk.net.cli import days_loader
    from pategail.sdk.synthetic import write_synthetic_csv

    user = int(dataset.users[2])
    days = dataset.user_days(user)
    write_synthetic_csv(tmp_path / "mine.csv", days, dataset.cells)
    args = argparse.Namespace(days=tmp_path / "mine.csv", data=None, user=None, user_days=load_user_days)
    np.testing.assert_array_equal(days_loader(args)(), days)
    args = argparse.Namespace(days=None, data=data_dir, user=user, user_days=load_user_days)
    np.testing.assert_array_equal(days_loader(args)(), days)
    assert days_loader(argparse.Namespace(days=None, data=None, user=None)) is None


@pytest.mark.parametrize("argv, message", [
    (["device", "--server", "ftp://x", "--store", "S", "--days", "d.csv"], "expected http://HOST:PORT"),
    (["device", "--server", "http://127.0.0.1:9", "--store", "S", "--data", "D"], "--data needs --user"),
    (["device", "--server", "http://127.0.0.1:9", "--store", "S", "--user", "3"], "--user goes with --data"),
    (["device", "--server", "http://127.0.0.1:9", "--store", "S", "--coordinator-key", "abc"], "64 hex digits"),
    (["emulate", "--server", "http://127.0.0.1:9", "--data", "DATA", "--devices", "3", "--processes", "4"],
     "more processes than the 3 devices"),
    (["emulate", "--server", "http://127.0.0.1:9", "--data", "DATA", "--devices", "11"], "only 10 users"),
])
def test_user_mistakes_are_one_line(argv, message, tmp_path, data_dir, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [str(data_dir) if a == "DATA" else a for a in argv]
    assert main(["-q", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_a_device_that_cannot_reach_the_service_gives_up_with_one_line(tmp_path, dataset, capsys):
    from pategail.sdk.net.client import DeviceClient, RetryPolicy, ServiceError

    client = DeviceClient("http://127.0.0.1:9", tmp_path / "d", retry=RetryPolicy(first_s=0.01, cap_s=0.05,
                                                                                  give_up_s=0.3),
                          rng=np.random.default_rng(0))
    with pytest.raises(ServiceError, match="no answer for 0.3 s"):
        client.enrol()


@pytest.mark.parametrize("argv, message", [
    (["--data", "DATA", "--user", "10"], "no user 10"),
    (["--data", "DATA", "--user", "-1"], "no user -1"),
    (["--days", "EMPTY"], "empty.csv: no rows"),
    (["--server", "ftp://127.0.0.1:9", "--data", "DATA", "--user", "1"], "expected http://HOST:PORT"),
    (["--server", "http://127.0.0.1:70000", "--data", "DATA", "--user", "1"], "not a valid port"),
    (["--server", "http://127.0.0.1:9/pategail", "--data", "DATA", "--user", "1"], "a path, query"),
    (["--cafile", "nope.pem", "--server", "https://127.0.0.1:9", "--data", "DATA", "--user", "1"],
     "--cafile nope.pem: no such file"),
    (["--cafile", "NOTPEM", "--server", "https://127.0.0.1:9", "--data", "DATA", "--user", "1"],
     "not CA certificates in PEM form"),
    (["--cafile", "NOTPEM", "--data", "DATA", "--user", "1"], "the service's address is http://"),
])
def test_bad_local_input_fails_before_the_device_makes_its_identity(argv, message, tmp_path, data_dir, capsys,
                                                                     monkeypatch):
    """Nothing is sent and no identity is made: a typo costs the run no seat. (The server's port has no
    service: had the device tried to enrol, it would fail with "no answer", not with the message.)"""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.csv").write_text("agent,day,slot,cell,lat,lon\n")
    (tmp_path / "not.pem").write_text("hello\n")
    subs = {"DATA": str(data_dir), "EMPTY": str(tmp_path / "empty.csv"), "NOTPEM": str(tmp_path / "not.pem")}
    argv = [subs.get(a, a) for a in argv]
    if "--server" not in argv:
        argv = ["--server", "http://127.0.0.1:9", *argv]
    assert main(["-q", "device", "--store", "store", "--give-up", "0.2", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err, err
    assert not (tmp_path / "store" / "identity.key").exists()


@pytest.mark.parametrize("store, message", [("FILE", "is a file, not a directory"),
                                            ("FILE/sub", "is a file, not a directory")])
def test_a_store_that_cannot_be_a_directory_is_one_line(store, message, tmp_path, data_dir, capsys):
    (tmp_path / "f").write_text("x")
    store = store.replace("FILE", str(tmp_path / "f"))
    assert main(["-q", "device", "--server", "http://127.0.0.1:9", "--store", store, "--data", str(data_dir),
                 "--user", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_emulate_names_a_missing_cafile_and_a_store_under_a_file(tmp_path, data_dir, capsys):
    assert main(["-q", "emulate", "--server", "https://127.0.0.1:9", "--data", str(data_dir), "--devices", "2",
                 "--cafile", str(tmp_path / "nope.pem")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--cafile {tmp_path / 'nope.pem'}: no such file" in err and "\n" not in err
    (tmp_path / "f").write_text("x")
    assert main(["-q", "emulate", "--server", "http://127.0.0.1:9", "--data", str(data_dir), "--devices", "2",
                 "--store", str(tmp_path / "f" / "devices")]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def test_serve_refuses_bad_places_at_once_and_makes_no_run_directory(tmp_path, data_dir, capsys):
    import socket
    import time

    (tmp_path / "f").write_text("x")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    common = ["-q", "serve", "--data", str(data_dir), "--no-privacy", "--no-downstream"]
    cases = [(["--out", str(tmp_path / "run"), "--port", "70000"], "a port is 0 to 65535"),
             (["--out", str(tmp_path / "f" / "run"), "--port", "0"], "is a file, not a directory"),
             (["--out", str(tmp_path / "run"), "--port", str(busy.getsockname()[1])], "in use by another process"),
             (["--out", str(tmp_path / "run"), "--port", "0", "--enrol-tokens", "nope.txt"], "no such file")]
    try:
        for argv, message in cases:
            t0 = time.monotonic()
            assert main([*common, *argv]) == 2
            err = capsys.readouterr().err.strip()
            assert message in err and "\n" not in err, err
            assert time.monotonic() - t0 < 3                # before the export
            assert not (tmp_path / "run").exists()
    finally:
        busy.close()


def test_serve_resume_if_any_resumes_a_run_that_is_there(tmp_path, data_dir, capsys):
    """A service manager restarts serve with the same command: --resume-if-any continues the run in --out
    (here one made by other settings, which resuming refuses) where the plain command refuses to touch it."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"config": {"an old setting": 1}}\n')
    common = ["-q", "serve", "--data", str(data_dir), "--out", str(run), "--no-privacy", "--no-downstream",
              "--port", "0"]
    assert main(common) == 2
    assert "holds a run already; add --resume" in capsys.readouterr().err
    assert main([*common, "--resume-if-any"]) == 2
    assert "this run was made by another version of pategail" in capsys.readouterr().err
