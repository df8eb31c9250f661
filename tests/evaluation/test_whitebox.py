"""White-box membership features from the published policy (ONNX), and a planted leak: a policy that
memorised its members' days gives them away."""
import numpy as np
import onnxruntime as ort
import pytest
import torch

from pategail.attacks.membership import AttackConfig, attack_sample, membership_attack
from pategail.attacks.whitebox import action_log_probs, user_homes, whitebox_features
from pategail.export.onnx_policy import save_policy_onnx
from pategail.sdk.features import action_mask, infer_home, label_actions, state_features
from pategail.server.policy import Policy, PolicyConfig, masked_log_probs

N_CELLS = 60


def _cells(rng):
    return np.column_stack([39.9 + rng.random(N_CELLS) * 0.1, 116.3 + rng.random(N_CELLS) * 0.1])


def _session(policy, tmp_path):
    path = save_policy_onnx(policy, tmp_path / "policy.onnx")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _torch_log_probs(policy, days, homes, cells):
    d = torch.as_tensor(days, dtype=torch.int64)
    feats = torch.as_tensor(state_features(days, homes, cells))
    logits, _ = policy(d, feats)
    return masked_log_probs(logits, torch.as_tensor(action_mask(days, homes)))


def test_homes_come_from_each_users_days():
    days = np.array([[1] * 12 + [5] * 36, [1] * 12 + [6] * 36, [2] * 48])
    assert user_homes(days, np.array([7, 7, 8])).tolist() == [1, 1, 2]


def test_log_probs_are_the_policys_for_the_labelled_actions(tmp_path):
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(n_cells=N_CELLS, d_model=16, n_layers=1)).eval()
    cells = _cells(rng)
    days = np.repeat(rng.integers(0, N_CELLS, (5, 12)), 4, axis=1)        # stays and moves
    homes = np.array([infer_home(d[None]) for d in days])
    got = action_log_probs(_session(policy, tmp_path), days, homes, cells, batch=2)
    with torch.no_grad():
        lp = _torch_log_probs(policy, days, homes, cells)[:, :-1]
    want = np.take_along_axis(lp.numpy(), label_actions(days, homes)[..., None].astype(np.int64), 2)[..., 0]
    assert got.shape == (5, 47)
    np.testing.assert_allclose(got, np.maximum(want, -30), atol=1e-4)


def _users(rng, n_users, days_per_user=3):
    """Each user repeats one idiosyncratic day over its own cells."""
    days, users = [], []
    for u in range(n_users):
        own = rng.choice(N_CELLS, 6, replace=False)
        day = own[np.repeat(rng.integers(0, 6, 16), 3)]
        days.append(np.repeat(day[None], days_per_user, axis=0))
        users.append(np.full(days_per_user, u))
    return np.concatenate(days), np.concatenate(users)


@pytest.mark.slow
def test_planted_leak_policy_that_memorised_members_gives_auc_near_one(tmp_path):
    rng = np.random.default_rng(3)
    cells = _cells(rng)
    days, users = _users(rng, 16)
    members = users < 8
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(n_cells=N_CELLS, d_model=32, n_layers=1))
    homes = user_homes(days[members], users[members])
    labels = torch.as_tensor(label_actions(days[members], homes).astype(np.int64))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for _ in range(100):                     # behaviour cloning until the members' days are memorised
        lp = _torch_log_probs(policy, days[members], homes, cells)[:, :-1]
        loss = -lp.gather(-1, labels[..., None]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    policy.eval()
    sample = attack_sample(days[members], users[members], days[~members], users[~members], 10,
                           np.random.default_rng(1))
    features = whitebox_features(_session(policy, tmp_path), sample[0], sample[1], cells)
    res = membership_attack(features, sample[1], sample[2], AttackConfig(n_folds=4, n_estimators=30,
                                                                          n_bootstrap=200),
                            np.random.default_rng(2))
    assert res["auc"] >= 0.9 and res["accuracy"] >= 0.8
