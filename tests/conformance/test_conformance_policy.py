"""The policy transformer: causal (slot t sees slots <= t only), masked log-probabilities, config checks."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pategail.server.policy import MASKED_LOGIT, Policy, PolicyConfig, masked_log_probs


def test_changing_a_later_slot_leaves_earlier_outputs_unchanged(torch_models, random_policy_inputs):
    policy = torch_models[0]
    cells, features, _ = (torch.from_numpy(a) for a in random_policy_inputs)
    t = 30
    cells2, features2 = cells.clone(), features.clone()
    cells2[:, t:] = (cells2[:, t:] + 17) % policy.config.n_cells
    features2[:, t:] += 3.0
    with torch.no_grad():
        logits, values = policy(cells, features)
        logits2, values2 = policy(cells2, features2)
    assert torch.equal(logits[:, :t], logits2[:, :t]) and torch.equal(values[:, :t], values2[:, :t])
    assert not torch.allclose(logits[:, t:], logits2[:, t:])          # the later slots did change


def test_prefix_run_equals_full_run(torch_models, random_policy_inputs):
    """Devices run the model on the prefix l_0..l_t: the result must equal row t of the full day."""
    policy = torch_models[0]
    cells, features, _ = (torch.from_numpy(a) for a in random_policy_inputs)
    with torch.no_grad():
        full_logits, full_values = policy(cells, features)
        for t in (0, 1, 23, 47):
            logits, values = policy(cells[:, :t + 1], features[:, :t + 1])
            torch.testing.assert_close(logits, full_logits[:, :t + 1], atol=1e-6, rtol=0)
            torch.testing.assert_close(values, full_values[:, :t + 1], atol=1e-6, rtol=0)


def test_output_shapes_and_history_is_used(torch_models, random_policy_inputs):
    policy = torch_models[0]
    cells, features, _ = (torch.from_numpy(a) for a in random_policy_inputs)
    with torch.no_grad():
        logits, values = policy(cells, features)
        # the last slot's output depends on an earlier slot: attention spans the history
        cells2 = cells.clone()
        cells2[:, 3] = (cells2[:, 3] + 5) % policy.config.n_cells
        logits2, _ = policy(cells2, features)
    assert logits.shape == (5, 48, 4) and values.shape == (5, 48)
    assert not torch.allclose(logits[:, -1], logits2[:, -1])


def test_masked_log_probs_give_zero_probability_to_impossible_actions():
    logits = torch.tensor([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    mask = torch.tensor([[True, False, True, False], [True, True, True, True]])
    lp = masked_log_probs(logits, mask)
    p = lp.exp()
    assert torch.all(p[~mask] == 0)
    torch.testing.assert_close(p.sum(-1), torch.ones(2))
    torch.testing.assert_close(lp[0, [0, 2]], torch.log_softmax(logits[0, [0, 2]], -1))
    # entropy stays finite (no 0 * -inf)
    assert torch.isfinite((p * lp).sum(-1)).all()
    assert MASKED_LOGIT < -1e6


def test_fresh_policy_is_near_uniform_with_zero_values():
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(n_cells=10))
    cells = torch.randint(0, 10, (3, 48))
    with torch.no_grad():
        logits, values = policy(cells, torch.randn(3, 48, 11))
    assert torch.all(values == 0)
    assert logits.abs().max() < 0.5


@pytest.mark.parametrize("kwargs", [dict(n_cells=0), dict(n_cells=5, d_model=30, n_heads=4),
                                    dict(n_cells=5, dropout=1.0), dict(n_cells=5, n_layers=0)])
def test_config_is_validated(kwargs):
    with pytest.raises(ValueError):
        PolicyConfig(**kwargs)


def test_save_and_load_policy_round_trip(tmp_path, torch_models):
    from pategail.server.policy import load_policy, save_policy

    policy = torch_models[0]
    save_policy(policy, tmp_path / "policy.pt")
    back = load_policy(tmp_path / "policy.pt")
    assert back.config == policy.config
    for (n, a), (m, b) in zip(policy.state_dict().items(), back.state_dict().items()):
        assert n == m and torch.equal(a, b)
    rng = np.random.default_rng(0)
    cells = torch.from_numpy(rng.integers(0, policy.config.n_cells, (2, 48)))
    features = torch.zeros(2, 48, 11)
    with torch.no_grad():
        assert torch.equal(policy.eval()(cells, features)[0], back.eval()(cells, features)[0])


def test_a_policy_file_with_settings_that_no_longer_exist_is_refused_in_one_line(tmp_path, torch_models):
    import dataclasses

    from pategail.server.errors import PategailError
    from pategail.server.policy import load_policy, save_policy

    save_policy(torch_models[0], tmp_path / "policy.pt")
    blob = torch.load(tmp_path / "policy.pt", weights_only=True)
    blob["config"] = {**dataclasses.asdict(torch_models[0].config), "retired_knob": True}
    torch.save(blob, tmp_path / "old.pt")
    with pytest.raises(PategailError, match="retired_knob"):
        load_policy(tmp_path / "old.pt")
