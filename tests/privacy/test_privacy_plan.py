"""The privacy plan: made once per run with dp-accounting's calibration, tight against the target, kept."""
from __future__ import annotations

import json

import pytest

from pategail.server.privacy.accountant import PrivacyAccountant, QueryRelease, composed_epsilon
from pategail.server.privacy.plan import PLAN_FILE, PLAN_INTERVAL, PrivacyPlan, load_or_make_plan, plan_privacy

Q = 2000


@pytest.fixture(scope="module")
def plan():
    return plan_privacy(4.0, 1e-5, 2.0, Q)


def test_plan_meets_the_target_tightly(plan):
    assert plan.sq_sum_noise_scale == pytest.approx(plan.sum_noise_scale / (2.0 - 1.0))    # Theorem 3, κ = 2
    assert plan.per_query_epsilon == pytest.approx(1 / plan.sum_noise_scale + 1 / plan.sq_sum_noise_scale)
    assert plan.expected_epsilon <= 4.0
    # the run's accountant (finer grid) agrees that the planned releases stay within the target
    acc = PrivacyAccountant(target_delta=1e-5)
    acc.record(plan.sum_noise_scale, plan.sq_sum_noise_scale, Q)
    assert acc.epsilon() <= 4.0
    # and the plan adds no noise it could spare: 0.1% less noise already breaks the target on its grid
    b = plan.sum_noise_scale * (1 - 1e-3)
    assert composed_epsilon([QueryRelease(b, b, Q)], 1e-5, PLAN_INTERVAL) > 4.0


def test_no_privacy_plan_adds_no_noise():
    plan = plan_privacy(None, 1e-5, 2.0, Q)
    assert plan.noise_scales == (0.0, 0.0) and plan.per_query_epsilon is None and not plan.private
    assert plan.mechanism.startswith("none")


def test_plan_is_made_once_and_kept(plan, tmp_path, monkeypatch):
    (tmp_path / PLAN_FILE).write_text(json.dumps(plan.to_dict()))
    calls = []
    monkeypatch.setattr("pategail.server.privacy.plan.plan_privacy", lambda *a, **kw: calls.append(a) or plan)
    assert load_or_make_plan(tmp_path, 4.0, 1e-5, 2.0, Q) == plan and not calls      # the kept one
    load_or_make_plan(tmp_path, 4.0, 1e-5, 2.0, Q + 1)                                 # other settings: new plan
    assert calls == [(4.0, 1e-5, 2.0, Q + 1)]
    assert PrivacyPlan.from_dict(json.loads((tmp_path / PLAN_FILE).read_text())) == plan
