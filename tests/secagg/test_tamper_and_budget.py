"""A detected tampering ends `pategail train` with one line naming the round and exit
status 3, the run resumes, and --epsilon holds through retries: the plan keeps a round in reserve, and a
release that would take the composed ε past the target is never started (exit status 4)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pategail.server.config import merge_settings
from pategail.cli import main
from pategail.data.prepare import prepare_dataset
from pategail.sdk.secagg.client import SecAggClient
from pategail.sdk.secagg.messages import MaskedInput
from pategail.sdk.secagg.prg import P61
from pategail.server.checkpoint import read_intents
from pategail.server.releases import release_of

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(rounds=2, days_per_round=6, discriminator={"steps": 2, "batch_size": 16}, environment={"candidates": 50}, policy={"d_model": 16, "n_layers": 1}, ppo={"n_epochs": 2, "batch_size": 3})
EPSILON = 50.0


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "default"
    prepare_dataset("pategail", ROOT / "data" / "default", out, allow_pickle=True)
    return out


def _argv(data, run, config, *extra):
    return ["-q", "train", "--data", str(data), "--out", str(run), "--devices", "3", "--epsilon", str(EPSILON),
            "--data-derived-cells", "--config", str(config), "--no-progress", "--prediction-steps", "2", *extra]


def _config(tmp_path, **overrides) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(merge_settings(TINY, overrides)))
    return path


def _corrupt_checksum_word_in(monkeypatch, training_round: int):
    """One device (the first asked) sends a wrong checksum word in ``training_round``'s secure aggregation."""
    real = SecAggClient.masked_input
    hit = []

    def masked_input(self, share_delivery, scores):
        reply = real(self, share_delivery, scores)
        cfg = self._round.config
        if release_of(cfg.round_id) == training_round and cfg.participants[0] == self.device_id:
            msg = MaskedInput.decode(reply, self._directory)
            vector = msg.vector.copy()
            vector[-1] = (int(vector[-1]) + 1) % P61
            hit.append(cfg.round_id)
            return MaskedInput(msg.round_id, msg.config_digest, msg.sender, vector).encode(self._identity.sign)
        return reply
    monkeypatch.setattr(SecAggClient, "masked_input", masked_input)
    return hit


def test_tampering_is_one_line_exit_3_and_the_resumed_run_keeps_the_target(data, tmp_path, monkeypatch, capsys):
    run, config = tmp_path / "run", _config(tmp_path)
    hit = _corrupt_checksum_word_in(monkeypatch, 2)
    assert main(_argv(data, run, config)) == 3
    err = capsys.readouterr().err.strip()
    assert hit and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("pategail: error: round 2: ") and "checksum" in err and "--resume" in err
    assert [i["round"] for i in read_intents(run / "checkpoint")].count(2) == 1   # the attempt stays counted
    monkeypatch.undo()
    assert main(_argv(data, run, config, "--resume")) == 0
    report = json.loads((run / "report.json").read_text())
    assert report["training"]["rounds"] == 2
    assert report["privacy"]["epsilon_total"] <= EPSILON                    # the retry came out of the reserve
    attempts = [i["attempt"] for i in read_intents(run / "checkpoint") if i["round"] == 2]
    assert attempts == [0, 1]


def test_without_a_reserve_the_retry_is_not_started(data, tmp_path, monkeypatch, capsys):
    run, config = tmp_path / "run", _config(tmp_path, privacy={"retry_rounds": 0})
    _corrupt_checksum_word_in(monkeypatch, 2)
    status = main(_argv(data, run, config))
    err = capsys.readouterr().err
    assert status == 3, err
    monkeypatch.undo()
    before = read_intents(run / "checkpoint")
    status = main(_argv(data, run, config, "--resume"))
    err = capsys.readouterr().err.strip()
    assert status == 4, err
    assert len(err.splitlines()) == 1 and err.startswith("pategail: error: round 2: its release would take")
    assert f"past the target {EPSILON:g}" in err
    assert read_intents(run / "checkpoint") == before                  # nothing was started
