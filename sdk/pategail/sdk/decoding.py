"""How the policy is asked for the next action's log-probabilities while days grow slot by slot.

Two models can answer (both written into the bundle by ``pategail.export``):

- the **full-prefix** model (``policy.onnx``; inputs ``cells``, ``features``, ``mask`` of slots 0..t) re-reads
  the whole prefix at every slot — 47 slots cost ~24 times one day's worth of work;
- the **incremental** model (``policy_step.onnx``) takes only the new slot, its index ``slot`` and the
  per-layer key/value cache buffers of the day (inputs ``cache_key_i`` / ``cache_value_i``, each (batch,
  heads, capacity, head_dim), rows < slot filled, the rest masked out) and returns the new slot's keys and
  values (``new_key_i`` / ``new_value_i``, (batch, heads, 1, head_dim)), which :class:`BufferedDecoder`
  writes into the buffers in place: nothing is copied or reallocated from slot to slot;
- the first incremental model (bundles written before the buffers) took the cache so far, ``past_key_i`` /
  ``past_value_i`` (batch, heads, P, head_dim), and returned it grown by one slot (``present_*``), so every
  slot copied the whole cache (:class:`CachedDecoder`; still supported).

Both incremental models' outputs equal the full-prefix model's last row to float rounding (the conformance
suite checks 1e-5 on real days). :func:`decoder_for` wraps any of the three kinds of session in a decoder with
one call per slot, so :func:`pategail.sdk.generate.generate_days` runs unchanged with any bundle.
Torch-free: anything with ``run(output_names, feeds)`` (an ONNX Runtime session, or the coordinator's torch
policy behind the same interface) will do.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, NamedTuple, Protocol

import numpy as np

POLICY_INPUT_CELLS = "cells"
"""int64 (batch, slots): cell ids of slots 0..t (full prefix) or of the new slots (incremental)."""
POLICY_INPUT_FEATURES = "features"
"""float32 (batch, slots, 11): ``state_features`` of those slots."""
POLICY_INPUT_MASK = "mask"
"""bool (batch, slots, 4): ``action_mask`` of those slots."""
POLICY_INPUT_SLOT = "slot"
"""int64 scalar (incremental model): the index of the first new slot, i.e. how many cache rows are filled."""
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


def cache_names(n_layers: int) -> list[str]:
    """The incremental model's cache-buffer inputs, in order: cache_key_0, cache_value_0, cache_key_1, ..."""
    return [f"cache_{kind}_{i}" for i in range(int(n_layers)) for kind in ("key", "value")]


def new_names(n_layers: int) -> list[str]:
    """The incremental model's outputs of the new slots' keys and values, in the order of :func:`cache_names`."""
    return [f"new_{kind}_{i}" for i in range(int(n_layers)) for kind in ("key", "value")]


if TYPE_CHECKING:
    from onnxruntime import InferenceSession


class Session(Protocol):
    def run(self, output_names: list[str], input_feed: Mapping[str, np.ndarray]) -> list[np.ndarray]: ...


class CacheLayout(NamedTuple):
    """Shape of the key/value cache: ``n_layers`` pairs of float32 (batch, n_heads, P, head_dim)."""

    n_layers: int
    n_heads: int
    head_dim: int

    @classmethod
    def of_session(cls, session: InferenceSession) -> "CacheLayout | None":
        """The layout an ONNX Runtime session's inputs declare (either incremental model); None for a
        full-prefix model."""
        inputs = {i.name: i.shape for i in session.get_inputs()}
        prefix = next((p for p in ("cache_key_", "past_key_") if p + "0" in inputs), None)
        if prefix is None:
            return None
        n_layers = sum(1 for name in inputs if name.startswith(prefix))
        _, heads, _, head_dim = inputs[prefix + "0"]
        if not isinstance(heads, int) or not isinstance(head_dim, int):
            raise ValueError("the incremental policy model must fix the cache's heads and head_dim")
        return cls(n_layers, heads, head_dim)

    def empty(self, batch: int) -> list[np.ndarray]:
        """The cache of ``batch`` days with no slot yet (P = 0)."""
        shape = (int(batch), self.n_heads, 0, self.head_dim)
        return [np.zeros(shape, dtype=np.float32) for _ in range(2 * self.n_layers)]

    def buffers(self, batch: int, capacity: int) -> list[np.ndarray]:
        """Zeroed cache buffers for ``batch`` days of up to ``capacity`` slots (the masked rows must hold
        finite numbers: zeros, or an earlier day's)."""
        shape = (int(batch), self.n_heads, int(capacity), self.head_dim)
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
        feeds: dict[str, np.ndarray] = {POLICY_INPUT_CELLS: np.asarray(cells, dtype=np.int64)[:, None],
                 POLICY_INPUT_FEATURES: np.asarray(features, dtype=np.float32)[:, None],
                 POLICY_INPUT_MASK: np.asarray(mask, dtype=bool)[:, None]}
        feeds.update(zip(self._past, self._cache))
        log_probs, *self._cache = self.session.run(self._outputs, feeds)
        return log_probs[:, -1]


ONE_STAGE = 1 << 30
"""A :class:`BufferedDecoder` stage longer than any day: one buffer of the whole capacity from the first slot."""


class BufferedDecoder:
    """Next-action log-probabilities from the incremental model over cache buffers: one slot in, its keys and
    values written into row t of preallocated buffers (capacity ``slots - 1``: the last slot needs no action).

    The buffers grow in stages of ``stage`` rows (12, 24, 36 and 47 rows for 48-slot days). The model reads every
    row of the buffers it is given, filled or not, and its one-row attention products are bound by the bytes they
    read (BENCHMARKS.md, generation speed), so a day's early slots are served from short buffers; when a stage is
    full its rows are moved once into the next, longer one. All stages of a buffer share one block of memory the
    size of the longest, so the stages cost no memory. Rows >= ``slot`` are masked out whatever the capacity, so the
    outputs equal those of one 47-row buffer up to float rounding (within 1e-6 measured; the kernels sum over other
    lengths): days for a seed could differ only where a uniform draw falls that close to a step of the action CDF.

    The memory is kept from one :meth:`reset` to the next of the same batch size: the rows a new day has not
    written yet hold numbers of earlier days or stages (finite), which the model masks out."""

    STAGE = 12
    """Rows added per stage: 8, 12 and 16 were alike within noise on a trained bundle and 4 slower; 12 kept
    (BENCHMARKS.md, generation speed)."""

    def __init__(self, session: Session, layout: CacheLayout, slots: int = 48, stage: int | None = None):
        stage = self.STAGE if stage is None else stage
        if int(stage) < 1:
            raise ValueError(f"stage must be at least 1 row, got {stage}")
        self.session = session
        self.layout = layout
        self.capacity = int(slots) - 1
        self.capacities = tuple(range(int(stage), self.capacity, int(stage))) + (self.capacity,)
        self._outputs = [POLICY_OUTPUT_LOG_PROBS] + new_names(layout.n_layers)
        self._names = cache_names(layout.n_layers)
        self._memory: list[np.ndarray] = []

    def reset(self, batch: int) -> None:
        if not self._memory or len(self._memory[0]) != int(batch):
            self._memory = self.layout.buffers(batch, self.capacity)
        self._stage(0)
        self.t = 0

    def _stage(self, i: int) -> None:
        """Serve from the ``i``-th stage: views of capacity ``capacities[i]`` on the kept memory."""
        self._i = i
        batch, heads, _, head_dim = self._memory[0].shape
        shape = (batch, heads, self.capacities[i], head_dim)
        self._buffers = [m.reshape(-1)[:np.prod(shape)].reshape(shape) for m in self._memory]
        self._feeds = dict(zip(self._names, self._buffers))

    def feeds(self, cells: np.ndarray, features: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """The model's inputs for slot t (the decoder's count of calls so far) given slot t's cell (n,),
        features (n, 11) and mask (n, 4), moving to the next stage first when this one is full."""
        t = self.t
        if t >= self.capacity:
            raise ValueError(f"the cache holds {self.capacity} slots; call reset() to start new days")
        if t >= self.capacities[self._i]:
            short = self._buffers
            self._stage(self._i + 1)
            for long, rows in zip(self._buffers, short):
                _move_rows(rows, long, t)
        return {POLICY_INPUT_CELLS: np.asarray(cells, dtype=np.int64)[:, None],
                POLICY_INPUT_FEATURES: np.asarray(features, dtype=np.float32)[:, None],
                POLICY_INPUT_MASK: np.asarray(mask, dtype=bool)[:, None],
                POLICY_INPUT_SLOT: np.array(t, dtype=np.int64), **self._feeds}

    def write(self, new: list[np.ndarray]) -> None:
        """Write slot t's keys and values (the model's ``new_*`` outputs) into row t; t advances. Call it after
        :meth:`feeds` of the same slot (which moves to the next stage when one is full)."""
        if self.t >= self._buffers[0].shape[2]:
            raise ValueError(f"slot {self.t} has no row in this stage's buffers: call feeds() for it first")
        for buffer, rows in zip(self._buffers, new):
            buffer[:, :, self.t] = rows[:, :, 0]
        self.t += 1

    def __call__(self, cells: np.ndarray, features: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """float32 (n, 4): log π(· | s_t) given slot t's cell (n,), features (n, 11) and mask (n, 4)."""
        log_probs, *new = self.session.run(self._outputs, self.feeds(cells, features, mask))
        self.write(new)
        return log_probs[:, -1]


def _move_rows(short: np.ndarray, long: np.ndarray, t: int, block: int = 32) -> None:
    """long[:, :, :t] = short[:, :, :t] for two views of one block of memory, ``long`` of the larger capacity.
    Every day's rows move to a higher address, so moving the days from the last backwards never overwrites
    rows not yet read; numpy buffers the overlap within a group of ``block`` days (a small temporary instead of
    one the size of the whole cache)."""
    for start in range((len(short) - 1) // block * block, -1, -block):
        long[start:start + block, :, :t] = short[start:start + block, :, :t]


def decoder_for(session: Session, slots: int = 48) -> PrefixDecoder | CachedDecoder | BufferedDecoder:
    """The decoder a session supports, from its inputs (or, for a session that is not ONNX Runtime's, its
    ``cache_layout`` attribute and ``cache_buffers`` flag): :class:`BufferedDecoder` for the incremental model,
    :class:`CachedDecoder` for the first incremental model, :class:`PrefixDecoder` for the full-prefix one.
    A session's ``cache_stage`` attribute, when it has one, sets the buffered decoder's stage."""
    layout = getattr(session, "cache_layout", None)
    buffered = bool(getattr(session, "cache_buffers", False))
    if layout is None and hasattr(session, "get_inputs"):
        layout = CacheLayout.of_session(session)
        buffered = any(i.name == POLICY_INPUT_SLOT for i in session.get_inputs())
    if layout is None:
        return PrefixDecoder(session, slots)
    if not buffered:
        return CachedDecoder(session, layout)
    return BufferedDecoder(session, layout, slots, stage=getattr(session, "cache_stage", None))
