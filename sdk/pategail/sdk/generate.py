"""Generate synthetic days with the exported policy: the loop devices run, and the coordinator samples the
same way (one code path, so generated days never differ by where they were made).

At each slot t the policy model gets the state of slot t (cell, state features and action mask, kept up
to date by the environment's :class:`~pategail.sdk.day_state.DayState`) — with the key/value cache of the
earlier slots (incremental model) or the whole prefix (full-prefix model; :mod:`pategail.sdk.decoding`) —
and returns masked log-probabilities; the action at t is drawn from them and the EPR environment applies
it. Torch-free: numpy and an ONNX Runtime session (anything with ``run(output_names, feeds)``).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

# The policy models' interface (written to the bundle manifest by pategail.export) lives with the decoders
from pategail.sdk.decoding import (POLICY_INPUT_CELLS as POLICY_INPUT_CELLS,
                                   POLICY_INPUT_FEATURES as POLICY_INPUT_FEATURES,
                                   POLICY_INPUT_MASK as POLICY_INPUT_MASK,
                                   POLICY_OUTPUT_LOG_PROBS as POLICY_OUTPUT_LOG_PROBS,
                                   POLICY_OUTPUT_LOGITS as POLICY_OUTPUT_LOGITS,
                                   POLICY_OUTPUT_VALUES as POLICY_OUTPUT_VALUES, Session, decoder_for)
from pategail.sdk.epr import DEFAULT_ALPHA, CellGeometry, EPREnvironment
from pategail.sdk.features import N_ACTIONS, SLOTS, action_mask, state_features
from pategail.sdk.places import PlaceLaw


class GeneratedDays(NamedTuple):
    """days int32 (n, T): cells; actions int8 (n, T-1): the action taken at slots 0..T-2;
    log_probs float32 (n, T-1): log π(action | state) under the policy that sampled it (PPO's old log-probs)."""

    days: np.ndarray
    actions: np.ndarray
    log_probs: np.ndarray


def prefix_features(days: np.ndarray, homes: np.ndarray, cells: np.ndarray, slots: int = SLOTS) -> np.ndarray:
    """float32 (n, t+1, 11): the state features of the prefix ``days`` (n, t+1) of ``slots``-slot days —
    equal to the first t+1 rows of the full day's features, since ``state_features`` is causal."""
    return state_features(days, homes, cells, day_slots=slots)


def policy_step(policy_session: Session, days: np.ndarray, homes: np.ndarray, cells: np.ndarray,
                slots: int = SLOTS) -> np.ndarray:
    """float32 (n, 4): masked log-probabilities of the action at the last slot of ``days`` (n, t+1), a
    prefix of ``slots``-slot days, from the full-prefix model and ``state_features`` of the whole prefix
    (the reference that the incremental path is tested against)."""
    feeds = {
        POLICY_INPUT_CELLS: np.ascontiguousarray(days, dtype=np.int64),
        POLICY_INPUT_FEATURES: prefix_features(days, homes, cells, slots),
        POLICY_INPUT_MASK: action_mask(days, homes),
    }
    (log_probs,) = policy_session.run([POLICY_OUTPUT_LOG_PROBS], feeds)
    return log_probs[:, -1]


def sample_actions(log_probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """int8 (n,): one action per row of ``log_probs`` (n, 4), drawn by inverse CDF. Actions of probability
    0 (masked) are never drawn: their CDF step is empty."""
    p = np.exp(log_probs.astype(np.float64))
    cdf = np.cumsum(p, axis=1)
    u = rng.random(len(p)) * cdf[:, -1]
    actions: np.ndarray = np.minimum((cdf <= u[:, None]).sum(axis=1), N_ACTIONS - 1).astype(np.int8)
    return actions


def generate_days(policy_session: Session, geometry: CellGeometry, homes: np.ndarray, first_cells: np.ndarray,
                  rng: np.random.Generator, *, alpha: float = DEFAULT_ALPHA,
                  explore_factors: np.ndarray | None = None, slots: int = SLOTS,
                  places: PlaceLaw | None = None, max_cells: int | None = None) -> GeneratedDays:
    """Sample one day per (home, first cell) with the policy model and the EPR environment (with the learned
    place law ``places`` when given: d-EPR, pategail.sdk.places; with ``max_cells``, a day holding that many
    distinct cells adds no more: no explore, no first move home).

    ``policy_session``: the incremental model (key/value cache; one slot a step) or the full-prefix model
    (re-reads the prefix; old bundles) — :func:`pategail.sdk.decoding.decoder_for` tells them apart; both
    give the same days for the same ``rng`` up to float rounding of the log-probabilities (tested).
    homes, first_cells: int (n,); ``alpha`` and ``explore_factors`` set the explore law (pategail.sdk.epr).
    ``rng`` drives both the action draws and the environment's destinations.
    Returns :class:`GeneratedDays` (days (n, slots) int32, actions (n, slots-1) int8, log_probs float32).
    """
    homes = np.asarray(homes, dtype=np.int32)
    env = EPREnvironment(geometry, alpha=alpha, explore_factors=explore_factors, slots=slots, rng=rng,
                         places=places, max_cells=max_cells)
    env.reset(homes, first_cells)
    decoder = decoder_for(policy_session, slots)
    n = len(homes)
    decoder.reset(n)
    actions = np.empty((n, slots - 1), dtype=np.int8)
    log_probs = np.empty((n, slots - 1), dtype=np.float32)
    while not env.done:
        t = env.t
        lp = decoder(env.state.current, env.state.features(), env.mask())
        a = sample_actions(lp, rng)
        actions[:, t] = a
        log_probs[:, t] = np.take_along_axis(lp, a[:, None].astype(np.int64), 1)[:, 0]
        env.step(a)
    return GeneratedDays(env.days.copy(), actions, log_probs)
