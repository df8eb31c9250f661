"""One round of the paper's Algorithm 1 on the device, as pure steps over an ONNX Runtime training session.

k AdamW steps on minibatches of ``batch_size`` pairs — half the owner's real pairs (``pair_features`` of its
days with ``label_actions``, label expert), half the generated pairs of the request (label generated) —
then D_u(s, a) of every generated pair. Torch-free: numpy and onnxruntime (training build) only.

This module is the one definition of the device's training; a simulation of many devices must follow it:
per step, ``n_pos = batch_size // 2`` real rows drawn with replacement (``rng.integers``), then the
``n_neg = batch_size - n_pos`` generated rows: ``n_neg - r`` drawn with replacement from the request, then,
when the bundle declares replay (:mod:`pategail.sdk.replay`), ``r = replayed_count(n_neg, share, len(buffer))``
drawn with replacement from the buffer of earlier rounds' generated pairs; the rows in that order (real,
current, replayed), labels expert then generated. After scoring, :func:`pategail.sdk.replay.remember` adds
this round's pairs to the buffer (the rng's next draws). When the bundle declares ``input_scaling: "owner"``
every row the session sees (trained on or scored) is first mapped by :func:`owner_scaler` of the owner's real
pairs; the buffer keeps raw rows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pategail.sdk.bundle import TrainingSession
from pategail.sdk.features import N_PAIR_FEATURES, N_STATE_FEATURES, SLOTS, label_actions, pair_features
from pategail.sdk.messages import NON_FINITE, MessageError, RoundRequest
from pategail.sdk.replay import replayed_count


def positive_pairs(days: np.ndarray, home: int, cells: np.ndarray) -> np.ndarray:
    """float32 (n_days · 47, 15): the owner's real (state, action) pairs."""
    homes = np.full(len(days), home, dtype=np.int32)
    return pair_features(days, homes, label_actions(days, homes), cells).reshape(-1, N_PAIR_FEATURES)


OWNER_SCALE_FLOOR = 1.0 / SLOTS
"""Smallest scale of a state feature: one unit of the count features (a slot, a cell, over 48). A feature the
owner's days never vary (a device whose every day visits one cell) then still tells 2 cells from 1."""


@dataclass(frozen=True)
class InputScaler:
    """x ↦ (x − mean) / scale, column by column, on pair-feature rows (float32 (15,) each)."""

    mean: np.ndarray
    scale: np.ndarray

    def __call__(self, pairs: np.ndarray) -> np.ndarray:
        scaled: np.ndarray = ((pairs - self.mean) / self.scale).astype(np.float32)
        return scaled


def owner_scaler(positives: np.ndarray) -> InputScaler:
    """Standardise the state features by the owner's real pairs (mean, std floored at OWNER_SCALE_FLOOR);
    the action one-hot stays as it is. Why (issue 19): the count features are divided by 48, so on sparse data
    (real days of 1–4 cells) "4 cells so far" and "5 cells so far" differ by 0.02 in the input, and a small MLP
    with weight decay scored them alike (mean D 0.526 vs 0.516 on city (a)) — a 5th cell no real day has went
    unpunished. Scaled by the owner's own spread they differ by about one unit. The map is affine and
    invertible, so D can represent exactly what it could before; only its conditioning changes."""
    mean = np.zeros(N_PAIR_FEATURES, dtype=np.float32)
    scale = np.ones(N_PAIR_FEATURES, dtype=np.float32)
    state = np.asarray(positives, dtype=np.float64)[:, :N_STATE_FEATURES]
    mean[:N_STATE_FEATURES] = state.mean(axis=0)
    scale[:N_STATE_FEATURES] = np.maximum(state.std(axis=0), OWNER_SCALE_FLOOR)
    return InputScaler(mean, scale)


def train_and_score(session: TrainingSession, positives: np.ndarray, request: RoundRequest, cells: np.ndarray,
                    labels: dict[str, float], rng: np.random.Generator, *, replay: np.ndarray | None = None,
                    replay_share: float = 0.0, scaler: InputScaler | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Train ``session`` for ``request.k_steps`` steps, then score the request's generated pairs. Returns
    (float32 (n · 47,) D_u(s, a), float32 (n · 47, 15) those generated pairs). ``labels`` are the manifest's
    {"expert": ..., "generated": ...}; ``rng`` draws the minibatches; ``replay`` (float32 (m, 15)) are earlier
    rounds' generated pairs, ``replay_share`` the share of each minibatch's generated half taken from them;
    ``scaler`` maps every row before the session sees it (the returned pairs stay raw).
    MessageError (NON_FINITE) when the trained discriminator scores NaN or Inf; the session is then
    half-trained and the caller must discard it."""
    negatives = pair_features(request.days, request.homes, request.actions, cells).reshape(-1, N_PAIR_FEATURES)
    seen = negatives
    if scaler is not None:
        positives, seen = scaler(positives), scaler(negatives)
        replay = None if replay is None else scaler(replay)
    n_pos = request.batch_size // 2
    n_neg = request.batch_size - n_pos
    n_old = 0 if replay is None else replayed_count(n_neg, replay_share, len(replay))
    batch_labels = np.concatenate([np.full(n_pos, labels["expert"], dtype=np.float32),
                                   np.full(n_neg, labels["generated"], dtype=np.float32)])
    for _ in range(request.k_steps):
        i = rng.integers(0, len(positives), n_pos)
        j = rng.integers(0, len(negatives), n_neg - n_old)
        rows = [positives[i], seen[j]]
        if n_old:
            assert replay is not None                   # n_old > 0 only with a buffer
            rows.append(replay[rng.integers(0, len(replay), n_old)])
        session.train_step(np.concatenate(rows), batch_labels)
    _, prob = session.score(seen)
    if not np.isfinite(prob).all():
        raise MessageError(NON_FINITE, "the discriminator produced non-finite scores; state restored")
    return prob, negatives
