"""White-box membership features: what the published policy says about a real day, step by step.

The paper's white-box attacker scores every (state, action) pair of a target day with the released reward
and feeds those rewards to a random forest. No reward model is published here — only the policy π_θ — so the
analogue is the policy's log-probability of each of the day's actions: log π_θ(a_t | s_t) for t = 0..T-2,
with a_t the EPR action that explains the move l_t → l_{t+1} (``label_actions``) and the user's home
inferred from the user's days, as the device does. A policy that memorised its devices' days gives their
actions more probability than those of users it never saw.
"""
from __future__ import annotations

import numpy as np

from pategail.sdk.features import action_mask, infer_home, label_actions, state_features
from pategail.sdk.decoding import (POLICY_INPUT_CELLS, POLICY_INPUT_FEATURES, POLICY_INPUT_MASK,
                                   POLICY_OUTPUT_LOG_PROBS, Session)

LOG_PROB_FLOOR = -30.0
"""Log-probabilities are clipped here: an action the policy deems (almost) impossible is as telling at −30
as at −1e9, and the forest then sees no extreme values."""


def user_homes(days: np.ndarray, users: np.ndarray) -> np.ndarray:
    """int (n,): the home of each day's user, inferred from all of that user's given days (``infer_home``)."""
    users = np.asarray(users)
    homes = np.empty(len(users), dtype=np.int64)
    for user in np.unique(users):
        rows = users == user
        homes[rows] = infer_home(days[rows])
    return homes


def action_log_probs(session: Session, days: np.ndarray, homes: np.ndarray, cells: np.ndarray,
                     batch: int = 256) -> np.ndarray:
    """float32 (n, T-1): log π(a_t | s_t) of each real day's labelled actions under the policy model
    ``session`` (the bundle's ``policy.onnx``). One pass per day: the model is causal, so row t of the full
    day's output is the distribution at slot t."""
    days = np.asarray(days, dtype=np.int64)
    homes = np.asarray(homes, dtype=np.int64)
    n, T = days.shape
    actions = label_actions(days, homes).astype(np.int64)
    out = np.empty((n, T - 1), dtype=np.float32)
    for start in range(0, n, batch):
        d, h = days[start:start + batch], homes[start:start + batch]
        feeds = {POLICY_INPUT_CELLS: np.ascontiguousarray(d),
                 POLICY_INPUT_FEATURES: state_features(d, h, cells, day_slots=T),
                 POLICY_INPUT_MASK: action_mask(d, h)}
        (log_probs,) = session.run([POLICY_OUTPUT_LOG_PROBS], feeds)
        a = actions[start:start + batch]
        out[start:start + batch] = np.take_along_axis(log_probs[:, :-1], a[..., None], axis=2)[..., 0]
    return np.maximum(out, LOG_PROB_FLOOR)


def whitebox_features(session: Session, days: np.ndarray, users: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """float (n, T-1): the per-step log-probabilities of each attacked day (homes from each user's days)."""
    return action_log_probs(session, days, user_homes(days, users), cells).astype(np.float64)
