"""How the policy is asked for the next action's log-probabilities while days grow slot by slot.

Two models can answer (both written into the bundle by ``pategail.export``):

- the **full-prefix** model (``policy.onnx``; inputs ``cells``, ``features``, ``mask`` of slots 0..t) re-reads
  the whole prefix at every slot — 47 slots cost ~24 times one day's worth of work;
- the **incremental** model (``policy_step.onnx``) takes only the new slot and the per-layer key/value cache
  of the earlier ones (inputs ``past_key_i`` / ``past_value_i``, outputs ``present_key_i`` /
  ``present_value_i``, each (batch, heads, P, head_dim); an empty cache, P = 0, starts a day). Its outputs
  equal the full-prefix model's last row to float rounding (the conformance suite checks 1e-5 on real days).

:func:`decoder_for` wraps either kind of session in a decoder with one call per slot, so
:func:`pategail.sdk.generate.generate_days` runs unchanged with an old bundle (full prefix only) or a new one.
Torch-free: anything with ``run(output_names, feeds)`` (an ONNX Runtime session, or the coordinator's torch
policy behind the same interface) will do.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np

POLICY_INPUT_CELLS = "cells"
"""int64 (batch, slots): cell ids of slots 0..t (full prefix) or of the new slots (incremental)."""
POLICY_INPUT_FEATURES = "features"
"""float32 (batch, slots, 11): ``state_features`` of those slots."""
POLICY_INPUT_MASK = "mask"
"""bool (batch, slots, 4): ``action_mask`` of those slots."""
POLICY_OUTPUT_LOG_PROBS = "log_probs"
"""float32 (batch, slots, 4): log π(a | s_t), impossible actions ≈ −1e9 (probability exactly 0)."""
POLICY_OUTPUT_LOGITS = "logits"
"""float32 (batch, slots, 4): unmasked logits."""
POLICY_OUTPUT_VALUES = "values"
"""float32 (batch, slots): V(s_t)."""


def past_names(n_layers: int) -> list[str]:
    """The incremental model's cache inputs, in order: past_key_0, past_value_0, past_key_1, ..."""
    return [f"past_{kind}_{i}" for i in range(int(n_layers)) for kind in ("key", "value")]


def present_names(n_layers: int) -> list[str]:
    """The incremental model's cache outputs, in the order of :func:`past_names`."""
    return [f"present_{kind}_{i}" for i in range(int(n_layers)) for kind in ("key", "value")]


class Session(Protocol):
    def run(self, output_names, input_feed): ...


class CacheLayout(NamedTuple):
    """Shape of the key/value cache: ``n_layers`` pairs of float32 (batch, n_heads, P, head_dim)."""

    n_layers: int
    n_heads: int
    head_dim: int

    @classmethod
    def of_session(cls, session) -> "CacheLayout | None":
        """The layout an ONNX Runtime session's inputs declare; None for a full-prefix model."""
        inputs = {i.name: i.shape for i in session.get_inputs()}
        if "past_key_0" not in inputs:
            return None
        n_layers = sum(1 for name in inputs if name.startswith("past_key_"))
        _, heads, _, head_dim = inputs["past_key_0"]
        if not isinstance(heads, int) or not isinstance(head_dim, int):
            raise ValueError("the incremental policy model must fix the cache's heads and head_dim")
        return cls(n_layers, heads, head_dim)

    def empty(self, batch: int) -> list[np.ndarray]:
        """The cache of ``batch`` days with no slot yet (P = 0)."""
        shape = (int(batch), self.n_heads, 0, self.head_dim)
        return [np.zeros(shape, dtype=np.float32) for _ in range(2 * self.n_layers)]


class PrefixDecoder:
    """Next-action log-probabilities from the full-prefix model: keeps the days' cells, features and masks
    so far and runs the model on all of them at every slot."""

    def __init__(self, session: Session, slots: int = 48):
        self.session = session
        self.slots = int(slots)

    def reset(self, batch: int) -> None:
        self._cells = np.zeros((int(batch), self.slots), dtype=np.int64)
        self._features = np.zeros((int(batch), self.slots, 0), dtype=np.float32)
        self._mask = np.zeros((int(batch), self.slots, 0), dtype=bool)
        self.t = 0

    def __call__(self, cells: np.ndarray, features: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """float32 (n, 4): log π(· | s_t) given slot t's cell (n,), features (n, 11) and mask (n, 4)."""
        if self.t == 0:
            self._features = np.zeros((len(cells), self.slots, features.shape[1]), dtype=np.float32)
            self._mask = np.zeros((len(cells), self.slots, mask.shape[1]), dtype=bool)
        t = self.t
        self._cells[:, t], self._features[:, t], self._mask[:, t] = cells, features, mask
        self.t += 1
        (log_probs,) = self.session.run([POLICY_OUTPUT_LOG_PROBS], {
            POLICY_INPUT_CELLS: self._cells[:, :t + 1], POLICY_INPUT_FEATURES: self._features[:, :t + 1],
            POLICY_INPUT_MASK: self._mask[:, :t + 1]})
        return log_probs[:, -1]


class CachedDecoder:
    """Next-action log-probabilities from the incremental model: one slot in, the cache carried over."""

    def __init__(self, session: Session, layout: CacheLayout):
        self.session = session
        self.layout = layout
        self._outputs = [POLICY_OUTPUT_LOG_PROBS] + present_names(layout.n_layers)
        self._past = past_names(layout.n_layers)

    def reset(self, batch: int) -> None:
        self._cache = self.layout.empty(batch)

    def __call__(self, cells: np.ndarray, features: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """float32 (n, 4): log π(· | s_t) given slot t's cell (n,), features (n, 11) and mask (n, 4)."""
        feeds = {POLICY_INPUT_CELLS: np.asarray(cells, dtype=np.int64)[:, None],
                 POLICY_INPUT_FEATURES: np.asarray(features, dtype=np.float32)[:, None],
                 POLICY_INPUT_MASK: np.asarray(mask, dtype=bool)[:, None]}
        feeds.update(zip(self._past, self._cache))
        log_probs, *self._cache = self.session.run(self._outputs, feeds)
        return log_probs[:, -1]


def decoder_for(session: Session, slots: int = 48):
    """The decoder a session supports: :class:`CachedDecoder` for an incremental model (its cache layout read
    from the session's inputs, or from a ``cache_layout`` attribute), :class:`PrefixDecoder` otherwise."""
    layout = getattr(session, "cache_layout", None)
    if layout is None and hasattr(session, "get_inputs"):
        layout = CacheLayout.of_session(session)
    return PrefixDecoder(session, slots) if layout is None else CachedDecoder(session, layout)
