"""One round of the paper's Algorithm 1 on the device, as pure steps over an ONNX Runtime training session.

k AdamW steps on minibatches of ``batch_size`` pairs — half the owner's real pairs (``pair_features`` of its
days with ``label_actions``, label expert), half the generated pairs of the request (label generated) —
then D_u(s, a) of every generated pair. Torch-free: numpy and onnxruntime (training build) only.

This module is the one definition of the device's training; a simulation of many devices must follow it:
per step, ``n_pos = batch_size // 2`` real rows drawn with replacement (``rng.integers``), then the
``n_neg = batch_size - n_pos`` generated rows drawn with replacement from the request; the rows in that order,
labels expert then generated.
"""
from __future__ import annotations

import numpy as np

from pategail.sdk.bundle import TrainingSession
from pategail.sdk.features import N_PAIR_FEATURES, label_actions, pair_features
from pategail.sdk.messages import NON_FINITE, MessageError, RoundRequest


def positive_pairs(days: np.ndarray, home: int, cells: np.ndarray) -> np.ndarray:
    """float32 (n_days · 47, 15): the owner's real (state, action) pairs."""
    homes = np.full(len(days), home, dtype=np.int32)
    return pair_features(days, homes, label_actions(days, homes), cells).reshape(-1, N_PAIR_FEATURES)


def train_and_score(session: TrainingSession, positives: np.ndarray, request: RoundRequest, cells: np.ndarray,
                    labels: dict[str, float], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Train ``session`` for ``request.k_steps`` steps, then score the request's generated pairs. Returns
    (float32 (n · 47,) D_u(s, a), float32 (n · 47, 15) those generated pairs). ``labels`` are the manifest's
    {"expert": ..., "generated": ...}; ``rng`` draws the minibatches.
    MessageError (NON_FINITE) when the trained discriminator scores NaN or Inf; the session is then
    half-trained and the caller must discard it."""
    negatives = pair_features(request.days, request.homes, request.actions, cells).reshape(-1, N_PAIR_FEATURES)
    n_pos = request.batch_size // 2
    n_neg = request.batch_size - n_pos
    batch_labels = np.concatenate([np.full(n_pos, labels["expert"], dtype=np.float32),
                                   np.full(n_neg, labels["generated"], dtype=np.float32)])
    for _ in range(request.k_steps):
        i = rng.integers(0, len(positives), n_pos)
        j = rng.integers(0, len(negatives), n_neg)
        session.train_step(np.concatenate([positives[i], negatives[j]]), batch_labels)
    _, prob = session.score(negatives)
    if not np.isfinite(prob).all():
        raise MessageError(NON_FINITE, "the discriminator produced non-finite scores; state restored")
    return prob, negatives
