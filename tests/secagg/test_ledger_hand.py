"""A device's privacy ledger at unit level: the release each kind of round costs, the composed ε against the
same composition done directly, refusals exactly past the budget, persistence and unreadable files."""
from __future__ import annotations

import json
import math

import pytest

from pategail.sdk.accounting import GaussianRelease, QueryRelease, composed_epsilon
from pategail.sdk.secagg.config import RoundConfig
from pategail.sdk.secagg.errors import RoundRefused
from pategail.sdk.secagg.ledger import BUDGET, FORMAT, LEDGER_INTERVAL, PrivacyLedger, round_release

QUANTUM = 2.0 ** -24


def config(round_id=1, b=2.0, b_sq=1.0, m=50, **kw) -> RoundConfig:
    return RoundConfig(round_id, (1, 2, 3, 4), m, 3, 2, 0, b, b_sq, bytes(32), bytes(32), **kw)


def test_round_release_by_hand():
    assert round_release(config(b=2.0, b_sq=1.0, m=50)) == QueryRelease(2.0, 1.0, 50)
    assert round_release(config(b=0.0, b_sq=1.0)) is None and round_release(config(b=2.0, b_sq=0.0)) is None
    g = config(b=3.0, b_sq=0.0, m=64, mechanism="gaussian", block=8, clip_norm=2.0, colluders=1)
    assert round_release(g) == GaussianRelease(3.0, 2.0 + 0.5 * 8 * QUANTUM, 1, 2)      # shares n_min − t = 2
    assert round_release(config(b=0.0, b_sq=0.0, mechanism="gaussian", block=8, clip_norm=2.0)) is None


def test_epsilon_is_the_composition_of_the_recorded_releases_on_the_ledger_grid(tmp_path):
    ledger = PrivacyLedger(tmp_path / "ledger.json", target_epsilon=50.0, target_delta=1e-6)
    assert ledger.epsilon() == 0.0 and ledger.releases == ()
    ledger.record(config(1))
    ledger.record(config(2))                                     # the same noise: merged into one entry
    ledger.record(config(3, b=4.0, b_sq=3.0, m=20))
    assert ledger.releases == (QueryRelease(2.0, 1.0, 100), QueryRelease(4.0, 3.0, 20))
    direct = composed_epsilon([QueryRelease(2.0, 1.0, 100), QueryRelease(4.0, 3.0, 20)], 1e-6, LEDGER_INTERVAL)
    assert ledger.epsilon() == pytest.approx(direct, rel=1e-12)
    extra = QueryRelease(4.0, 3.0, 5)
    with_extra = composed_epsilon([QueryRelease(2.0, 1.0, 100), QueryRelease(4.0, 3.0, 25)], 1e-6, LEDGER_INTERVAL)
    assert ledger.epsilon(extra) == pytest.approx(with_extra, rel=1e-12)
    # written before record returns, in the ledger's format; a new ledger on the same file reads it back
    state = json.loads((tmp_path / "ledger.json").read_text())
    assert state["format"] == FORMAT and state["unbounded"] == 0 and len(state["releases"]) == 2
    again = PrivacyLedger(tmp_path / "ledger.json", target_epsilon=50.0, target_delta=1e-6)
    assert again.releases == ledger.releases and again.epsilon() == ledger.epsilon()


def test_check_refuses_exactly_past_the_budget(tmp_path):
    cfg = config(1, b=2.0, b_sq=1.0, m=50)
    one = composed_epsilon([QueryRelease(2.0, 1.0, 50)], 1e-5, LEDGER_INTERVAL)
    two = composed_epsilon([QueryRelease(2.0, 1.0, 100)], 1e-5, LEDGER_INTERVAL)
    ledger = PrivacyLedger(None, target_epsilon=(one + two) / 2)
    ledger.check(cfg)                                            # the first round fits
    ledger.record(cfg)
    with pytest.raises(RoundRefused) as refused:
        ledger.check(config(2))                                  # the second would reach `two`
    assert refused.value.code == BUDGET and "round 2" in str(refused.value)
    assert ledger.releases == (QueryRelease(2.0, 1.0, 50),)       # a refusal changes nothing
    exact = PrivacyLedger(None, target_epsilon=two)              # reaching the budget exactly is allowed
    exact.record(cfg)
    exact.check(config(2))


def test_noiseless_rounds(tmp_path):
    noiseless = config(1, b=0.0, b_sq=0.0)
    with pytest.raises(RoundRefused, match="no noise") as refused:
        PrivacyLedger(None, target_epsilon=10.0).check(noiseless)
    assert refused.value.code == BUDGET
    keeper = PrivacyLedger(tmp_path / "l.json")                   # no budget: records, refuses nothing
    keeper.check(noiseless)
    keeper.record(noiseless)
    assert keeper.epsilon() == math.inf and keeper.releases == ()
    assert PrivacyLedger(tmp_path / "l.json").epsilon() == math.inf   # the unbounded round is on disk too
    keeper.record(config(2, b=0.0, b_sq=0.0))
    assert json.loads((tmp_path / "l.json").read_text())["unbounded"] == 2    # counted, one per round


@pytest.mark.parametrize("content", ["not json", json.dumps({"format": "other/1", "releases": [], "unbounded": 0}),
                                     json.dumps({"format": FORMAT, "releases": []}),
                                     json.dumps({"format": FORMAT, "releases": [{"sum_scale": 1.0}],
                                                 "unbounded": 0})])
def test_an_unreadable_ledger_refuses_instead_of_starting_from_zero(tmp_path, content):
    (tmp_path / "ledger.json").write_text(content)
    with pytest.raises(RoundRefused, match="unreadable privacy ledger") as refused:
        PrivacyLedger(tmp_path / "ledger.json", target_epsilon=5.0)
    assert refused.value.code == BUDGET and "ledger.json" in str(refused.value)


@pytest.mark.parametrize("target", [0.0, -1.0])
def test_a_budget_must_be_positive(target):
    with pytest.raises(ValueError, match="target_epsilon"):
        PrivacyLedger(None, target_epsilon=target)
