"""A shard of the population fleet: a contiguous range of devices, their days and their stacked
discriminators, answering round and environment requests for all of them at once.

Devices are processed in chunks of :data:`CHUNK` consecutive ids, fixed by the ids alone (trained in groups
of :data:`TRAIN_GROUP` from the chunk's start), and every device draws its minibatches from its own generator
re-derived from (seed, device id, round) as the SDK emulator's devices do; so the result does not depend on
how the devices are split into shards (in one process or over Ray actors) nor on how many worker threads a
shard runs its chunks on (``workers``: each chunk is computed whole by one thread, and the shard's total is a
sum of integers): a device computes the same numbers wherever it runs.

State on disk (``state_dir``): after each round request, every chunk writes ``devices-<first>-<last>/
state-<round>.npz`` (its devices' parameters, both AdamW moments, step), atomically; the one of the round
before is kept, so a round asked for again after a coordinator restart is replayed from the state before it,
like the SDK device's before-round checkpoint. The files are per chunk, not per shard, so a run stopped with
one split (shards, processes, Ray workers) resumes with any other.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from pategail.sdk.cell_universe import release_mapping, remap_days, visited_vector
from pategail.sdk.discriminator_round import positive_pairs
from pategail.sdk.contribution import DAYS_CAP, env_l1_bound
from pategail.sdk.environment_vector import environment_vector
from pategail.sdk.features import N_PAIR_FEATURES, infer_home, pair_features
from pategail.sdk.files import replacing
from pategail.sdk.messages import RoundRequest
from pategail.sdk.secagg.mechanisms import gaussian_input, laplace_environment_input
from pategail.sdk.secagg.fixedpoint import clip_unit, encode, encode_signed

from .draws import minibatch_draws
from .stacked import Layout, OptimiserSettings, adamw_step, probabilities

log = logging.getLogger(__name__)
CHUNK = 256
"""Devices drawn, trained and scored by one task (a thread's unit of work); chunk boundaries are multiples of it
in device ids."""
TRAIN_GROUP = 32
"""Devices trained together within a chunk (their activations, 32 × 64 × 64 floats a layer, stay in the
core's cache: 25% faster than 256 at once, measured)."""


def chunk_directory(first: int, last: int) -> str:
    """The name of the state directory of the chunk of devices ``first``..``last``."""
    return f"devices-{first}-{last}"


@dataclass(frozen=True, eq=False)
class DeviceModel:
    """What every device of the population starts from (read from the bundle once, by the fleet)."""

    initial_parameters: np.ndarray
    """float32 (P,): the bundle's discriminator checkpoint."""
    layout: Layout
    optimiser: OptimiserSettings
    cells: np.ndarray
    """float64 (n_cells, 2): the bundle's cell table."""
    alpha: float
    candidates: int
    seed: int
    """The run's seed: device i's minibatches in round r come from default_rng([seed, i, r])."""
    action_rates: bool = False
    """The bundle's ``environment.action_rates``: environment vectors carry the action-rate part."""
    initial_states_days_cap: int = DAYS_CAP
    """The bundle's ``environment.initial_states_days_cap``."""
    policy: object = None
    """The policy the devices train in a DP-FedAvg run (pategail.population.fedavg.PolicyShape); None when
    the bundle has no policy training artifacts."""


def encoded_gaussian(values: np.ndarray, config) -> np.ndarray:
    """int64 (M,): one device's upload in a Gaussian-mechanism round before its noise share — its vector
    centred, averaged over the round's blocks and L2-clipped on the device (the SDK client's own
    :func:`~pategail.sdk.secagg.mechanisms.gaussian_input`, reading ``config.block`` and ``config.clip_norm``)."""
    return encode_signed(gaussian_input(np.asarray(values, dtype=np.float64), config))


def encoded_pair(values: np.ndarray) -> np.ndarray:
    """int64 (2M,): one contribution as the secure aggregation's client encodes it: clipped to [0, 1], then
    D and D² in fixed point (pategail.sdk.secagg.client.masked_input). ``values`` may be (c, M): summed."""
    v = clip_unit(values)
    both = np.concatenate([encode(v), encode(v * v)], axis=-1)
    return both if both.ndim == 1 else both.sum(0)


class PopulationShard:
    """Devices ``ids`` (consecutive); device ``ids[k]`` holds ``days[k]`` (int (n_k, 48)); ``chunk``: devices
    computed together (the fleet's, the same for every shard); ``workers``: threads computing chunks at once."""

    def __init__(self, ids: np.ndarray, days: list[np.ndarray], model: DeviceModel, state_dir: Path | None,
                 chunk: int = CHUNK, workers: int = 1):
        if chunk < 1 or workers < 1:
            raise ValueError("chunk and workers must be at least 1")
        self.chunk = chunk
        self.workers = workers
        self.ids = np.asarray(ids, dtype=np.int64)
        if len(self.ids) and not np.array_equal(self.ids, np.arange(self.ids[0], self.ids[0] + len(self.ids))):
            raise ValueError("a shard holds consecutive device ids")
        self.model = model
        self.state_dir = None if state_dir is None else Path(state_dir)
        # positives are shared between devices holding the same days (copies of one user in a resampled
        # population): one table per distinct day array
        self._tables: list[np.ndarray] = []
        self._table_of = np.empty(len(self.ids), dtype=np.int64)
        self._homes = np.empty(len(self.ids), dtype=np.int64)
        self._days = []
        seen: dict[bytes, int] = {}
        same: dict[int, int] = {}       # id of an array already seen -> its table (copies share one array)
        for k, d in enumerate(days):
            if id(d) in same:
                self._table_of[k] = same[id(d)]
                continue
            original = d
            d = np.ascontiguousarray(d, dtype=np.int32)
            key = d.tobytes()
            if key not in seen:
                seen[key] = len(self._tables)
                home = infer_home(d)
                self._tables.append(positive_pairs(d, home, model.cells))
                self._days.append(d)
            self._table_of[k] = same[id(original)] = seen[key]
        self._index_tables()
        self._reset()
        self._pending: tuple[str, Any] | None = None
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self._load_latest()

    def _index_tables(self) -> None:
        """All tables in one array: a chunk's minibatches are gathered with one indexing a step."""
        self._lengths = np.array([len(t) for t in self._tables], dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(self._lengths)[:-1]]).astype(np.int64)
        self._positives = (np.concatenate(self._tables) if self._tables
                           else np.empty((0, N_PAIR_FEATURES), dtype=np.float32))
        self._environment_cache: dict[tuple[int, int], np.ndarray] = {}

    def move_to_table(self, released: np.ndarray, model: DeviceModel) -> None:
        """A privately released cell table is published: every device moves its days onto it (a slot in a
        square that was not released to the nearest released one, :mod:`pategail.sdk.cell_universe`, from
        the public map the devices hold and the released ids alone) and takes ``model`` (the bundle on the
        released table); its discriminator is kept."""
        if len(model.cells) != len(released):
            raise ValueError(f"the bundle has {len(model.cells)} cells, {len(released)} squares were released")
        mapping = release_mapping(self.model.cells, released)
        self._days = [remap_days(d, mapping) for d in self._days]
        self._tables = [positive_pairs(d, infer_home(d), model.cells) for d in self._days]
        self.model = model
        self._index_tables()
        self._pending = None

    # -- state --------------------------------------------------------------------------------------------
    def _reset(self) -> None:
        """Every device as the bundle made it: the initial discriminator, zero AdamW moments, before round 1."""
        m = self.model
        p = np.broadcast_to(m.initial_parameters.astype(np.float32), (len(self.ids), m.layout.n_parameters))
        self.params = torch.from_numpy(np.ascontiguousarray(p))
        self.exp_avg = torch.zeros_like(self.params)
        self.exp_avg_sq = torch.zeros_like(self.params)
        self.step = 0
        self.round = 0

    def _chunk_states(self) -> list[tuple[int, int, Path]]:
        """(first row, end row, directory) of each chunk's state."""
        first = int(self.ids[0]) if len(self.ids) else 0
        assert self.state_dir is not None               # only a shard that keeps state asks
        return [(lo, hi, self.state_dir / chunk_directory(first + lo, first + hi - 1)) for lo, hi in self._chunks()]

    def _has_state(self, round_: int) -> bool:
        return all((d / f"state-{round_}.npz").is_file() for _, _, d in self._chunk_states())

    def _save(self) -> None:
        if self.state_dir is None:
            return
        for lo, hi, d in self._chunk_states():
            d.mkdir(parents=True, exist_ok=True)
            with replacing(d / f"state-{self.round}.npz") as tmp, open(tmp, "wb") as f:
                np.savez(f, params=self.params[lo:hi].numpy(), exp_avg=self.exp_avg[lo:hi].numpy(),
                         exp_avg_sq=self.exp_avg_sq[lo:hi].numpy(), step=self.step, round=self.round)
            for old in d.glob("state-*.npz"):       # keep this round's and the one before
                if int(old.stem.split("-")[1]) < self.round - 1:
                    old.unlink(missing_ok=True)

    def _load(self, round_: int) -> None:
        """Every chunk's state of ``round_``, checked whole (shapes, one step) before any is copied in place
        (no second copy of the fleet's state in memory)."""
        steps, width = set(), self.model.layout.n_parameters
        for lo, hi, d in self._chunk_states():
            path = d / f"state-{round_}.npz"
            with np.load(path) as z:            # members are read lazily: only the small ones here
                if z["params"].shape != (hi - lo, width):
                    raise ValueError(f"{path}: holds {z['params'].shape} parameters, this chunk {(hi - lo, width)}")
                steps.add((int(z["step"]), int(z["round"])))
        if len(steps) != 1:
            raise ValueError(f"{self.state_dir}: the chunks of devices {self.ids[0]}-{self.ids[-1]} hold "
                             f"different steps for round {round_}")
        for lo, hi, d in self._chunk_states():
            with np.load(d / f"state-{round_}.npz") as z:
                for name, tensor in (("params", self.params), ("exp_avg", self.exp_avg),
                                     ("exp_avg_sq", self.exp_avg_sq)):
                    tensor[lo:hi] = torch.from_numpy(z[name])
        (self.step, self.round), = steps

    def _load_latest(self) -> None:
        """The latest round every chunk holds (a stop in the middle of a save leaves some chunks a round
        ahead: each keeps the round before too); none: the devices start from the bundle."""
        latest = [max((int(p.stem.split("-")[1]) for p in d.glob("state-*.npz")), default=0)
                  for _, _, d in self._chunk_states()]
        round_ = min(latest, default=0)
        if round_ > 0:
            self._load(round_)
            log.info("devices %d-%d: resumed their discriminators after round %d", self.ids[0], self.ids[-1],
                     self.round)

    def parameters(self) -> np.ndarray:
        """float32 (n, P): every device's discriminator (rows in ``ids`` order)."""
        return self.params.numpy().copy()

    # -- requests -----------------------------------------------------------------------------------------
    def _chunks(self):
        """(start, stop) row ranges of whole id chunks (boundaries at multiples of ``chunk`` in device ids)."""
        first, end = (int(self.ids[0]), int(self.ids[-1]) + 1) if len(self.ids) else (0, 0)
        start = first
        while start < end:
            stop = min(end, (start // self.chunk + 1) * self.chunk)
            yield start - first, stop - first
            start = stop

    def _map(self, task, chunks: list[tuple[int, int]]):
        """task(lo, hi) over ``chunks``, in order, on the shard's worker threads. numpy's BLAS is held to one
        thread meanwhile: the workers are the parallelism (and its own threads would compete with them)."""
        with threadpool_limits(1, user_api="blas"):
            if self.workers == 1 or len(chunks) == 1:
                yield from (task(lo, hi) for lo, hi in chunks)
                return
            with ThreadPoolExecutor(min(self.workers, len(chunks))) as pool:
                yield from pool.map(lambda c: task(*c), chunks)

    def _train(self, lo: int, hi: int, request: RoundRequest, negatives: np.ndarray, labels: np.ndarray) -> None:
        """Devices ``lo``..``hi`` − 1 (rows of one chunk) take the request's k training steps: minibatches
        drawn as pategail.sdk.discriminator_round.train_and_score draws them (:mod:`.draws`)."""
        m, k = self.model, request.k_steps
        n_pos = request.batch_size // 2
        tables = self._table_of[lo:hi]
        pos, neg = minibatch_draws(m.seed, self.ids[lo:hi], max(request.round, 0), k, n_pos,
                                   request.batch_size - n_pos, self._lengths[tables], len(negatives))
        pos += self._offsets[tables][:, None, None]
        for g in range(lo, hi, TRAIN_GROUP):
            e = min(hi, g + TRAIN_GROUP)
            params, m1, m2 = self.params[g:e], self.exp_avg[g:e], self.exp_avg_sq[g:e]
            grad = torch.empty_like(params)
            batch = np.empty((e - g, request.batch_size, N_PAIR_FEATURES), dtype=np.float32)
            for s in range(k):
                np.take(self._positives, pos[g - lo:e - lo, s], axis=0, out=batch[:, :n_pos])
                np.take(negatives, neg[g - lo:e - lo, s], axis=0, out=batch[:, n_pos:])
                adamw_step(m.layout, m.optimiser, params, m1, m2, self.step + s + 1, batch, labels, grad)

    def round_request(self, request: RoundRequest) -> np.ndarray:
        """Train every device for the request's k steps, score its generated pairs; keep the request as the
        pending one and return the shard's Σ of encoded (D, D²) contributions, int64 (2M,)."""
        if request.round <= self.round:
            # asked again after a coordinator restart: replayed from the state before it (round 1: the bundle's)
            # (memory only, past round 1: nothing to replay from, the devices train on)
            if request.round == 1:
                self._reset()
            elif self.state_dir is not None:
                if not self._has_state(request.round - 1):
                    raise ValueError(f"devices {self.ids[0]}-{self.ids[-1]} are past round {request.round} and "
                                     f"hold no state of round {request.round - 1} to replay it from")
                self._load(request.round - 1)
            log.info("round %d again: replayed from the state before it", request.round)
        m = self.model
        negatives = np.ascontiguousarray(
            pair_features(request.days, request.homes, request.actions, m.cells).reshape(-1, N_PAIR_FEATURES),
            dtype=np.float32)
        n_pos = request.batch_size // 2
        labels = np.concatenate([np.full(n_pos, m.optimiser.expert_label, dtype=np.float32),
                                 np.full(request.batch_size - n_pos, m.optimiser.generated_label, dtype=np.float32)])

        def chunk(lo: int, hi: int) -> np.ndarray:
            self._train(lo, hi, request, negatives, labels)
            prob = probabilities(m.layout, self.params[lo:hi].numpy(), negatives)
            if not np.isfinite(prob).all():
                raise FloatingPointError(f"devices {self.ids[lo]}-{self.ids[hi - 1]}: non-finite scores")
            return encoded_pair(prob.astype(np.float64))

        total = np.zeros(2 * len(negatives), dtype=np.int64)
        t0, done, next_report = time.perf_counter(), 0, len(self.ids) // 10
        chunks = list(self._chunks())
        for (lo, hi), part in zip(chunks, self._map(chunk, chunks)):
            total += part
            done += hi - lo
            if next_report and done >= next_report and done < len(self.ids):   # a long round: minutes
                log.info("round %d: %d of %d devices trained and scored (%.0f s)", request.round, done,
                         len(self.ids), time.perf_counter() - t0)
                next_report += len(self.ids) // 10
        self.step += request.k_steps
        self.round = request.round
        self._pending = ("round", negatives)
        self._save()
        return total

    def fedavg_request(self, request) -> np.ndarray:
        """DP-FedAvg: every device's local epochs from the request's parameters; the shard's Σ of encoded
        uploads, int64 (P,) (:mod:`pategail.population.fedavg`)."""
        from .fedavg import LocalTrainer, shard_fedavg

        if self.model.policy is None:
            raise ValueError("the bundle has no policy training artifacts: not a DP-FedAvg run")
        if getattr(self, "_trainer", None) is None:
            self._trainer = LocalTrainer(self.model.policy)  # type: ignore[arg-type]  # checked not None above
        homes = [infer_home(d) for d in self._days]
        total = np.zeros(len(request.parameters), dtype=np.int64)
        with threadpool_limits(1, user_api="blas"):
            for lo, hi in self._chunks():
                total += shard_fedavg(self._trainer, self.ids[lo:hi], self._days, homes, self._table_of[lo:hi],
                                      self.model.cells, self.model.seed, request)
        self._pending = ("fedavg", None)
        return total

    def _environment(self, table: int, region_cells: int = 0) -> np.ndarray:
        """float64: the environment contribution of a device holding ``self._days[table]`` (the SDK device's
        _on_initial_states_request)."""
        key = (table, region_cells)
        if key not in self._environment_cache:
            m, days = self.model, self._days[table]
            self._environment_cache[key] = environment_vector(days, infer_home(days), m.cells, m.alpha,
                                                              m.candidates, region_cells, m.action_rates,
                                                              m.initial_states_days_cap)
        return self._environment_cache[key]

    def environment_request(self, region_cells: int = 0) -> np.ndarray | None:
        """Make every device's environment contribution (coarse parts over regions of at most
        ``region_cells`` cells when > 0) pending; return the shard's Σ of encoded (v, v²) — each v L1-clipped as
        the SDK client does in a Laplace round (this total is only used by one)."""
        counts = np.bincount(self._table_of, minlength=len(self._tables))
        total = None
        for table, count in enumerate(counts):
            if count:
                part = encoded_pair(laplace_environment_input(self._environment(table, region_cells),
                                                              env_l1_bound(self.model.action_rates))) * count
                total = part if total is None else total + part
        self._pending = ("environment", region_cells)
        return total

    def cell_release_request(self, max_cells: int) -> None:
        """Make every device's visited vector over its cell table (the public map) pending: 1 on its
        ``max_cells`` most-visited squares (the SDK's :func:`~pategail.sdk.cell_universe.visited_vector`)."""
        self._pending = ("cells", max_cells)

    def contributions(self, device_ids, gaussian=None) -> np.ndarray | None:
        """Σ of the encoded pending contributions of ``device_ids`` (those of this shard among them), int64;
        None when none of them is here. Recomputed from the current state (the scores are a function of it).
        ``gaussian``: the round's configuration of a Gaussian-mechanism round — each device's vector is then
        what its secure-aggregation client uploads (:func:`encoded_gaussian`, M values), else (D, D²) (2M)."""
        encoded = encoded_pair if gaussian is None else (lambda v: encoded_gaussian(v, gaussian))
        rows = np.asarray(sorted(int(d) - int(self.ids[0]) for d in device_ids
                                 if len(self.ids) and self.ids[0] <= int(d) <= self.ids[-1]), dtype=np.int64)
        if not len(rows) or self._pending is None:
            return None
        kind, negatives = self._pending
        if kind == "cells":               # a device's vector depends only on its user's days: once per user
            if gaussian is None:
                raise ValueError("the cell table is released with the Gaussian mechanism")
            counts = np.bincount(self._table_of[rows], minlength=len(self._tables))
            return sum(  # type: ignore[return-value]  # rows is not empty: never the empty sum's 0
                int(c) * encoded(visited_vector(self._days[t], len(self.model.cells), negatives))
                for t, c in enumerate(counts) if c)
        if kind == "environment":         # a device's vector depends only on its user's days: once per user
            if gaussian is None:          # the Laplace round: the device's own L1 clip (a no-op when honest)
                bound = env_l1_bound(self.model.action_rates)
                encoded = lambda v: encoded_pair(laplace_environment_input(v, bound))  # noqa: E731
            counts = np.bincount(self._table_of[rows], minlength=len(self._tables))
            return sum(  # type: ignore[return-value]  # rows is not empty: never the empty sum's 0
                int(c) * encoded(self._environment(t, negatives)) for t, c in enumerate(counts) if c)

        def chunk(lo: int, hi: int) -> np.ndarray | int:    # whole chunks, as scored for the request: bit for bit
            inside = rows[(rows >= lo) & (rows < hi)]
            prob = probabilities(self.model.layout, self.params[lo:hi].numpy(), negatives)[inside - lo]
            prob = prob.astype(np.float64)
            return encoded_pair(prob) if gaussian is None else sum(encoded(p) for p in prob)

        chunks = [(lo, hi) for lo, hi in self._chunks() if ((rows >= lo) & (rows < hi)).any()]
        return sum(self._map(chunk, chunks))
