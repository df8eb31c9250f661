"""`pategail device` and `pategail emulate`: where a device's days come from, and one-line errors for user
mistakes (exit 2, no traceback)."""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from pategail.cli import main


def test_days_come_from_a_synthetic_csv_or_a_data_set_user(tmp_path, dataset, data_dir):
    from pategail.sdk.net.cli import days_loader
    from pategail.sdk.synthetic import write_synthetic_csv

    user = int(dataset.users[2])
    days = dataset.user_days(user)
    write_synthetic_csv(tmp_path / "mine.csv", days, dataset.cells)
    args = argparse.Namespace(days=tmp_path / "mine.csv", data=None, user=None)
    np.testing.assert_array_equal(days_loader(args)(), days)
    args = argparse.Namespace(days=None, data=data_dir, user=user)
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
