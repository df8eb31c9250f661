"""The population fleet: N simulated devices behind the byte-level :class:`~pategail.server.fleet.Fleet`
interface — the coordinator talks to it exactly as to the SDK fleet.

Every message the coordinator broadcasts is carried out for all devices at once, the first time any device
receives it (the coordinator sends each message to every device); each device's reply is the SDK device's
(an Ack of the same round, kind and length, or the same ErrorReply for a message it refuses). The secure sum
is the ideal functionality (:mod:`pategail.population.ideal`); with ``dropout`` > 0 that share of the
contributors, drawn per round, drop out before their masked input (after sending their shares), and a round
below n_min aborts (SecAggAbort, nothing released) as the real protocol does.

A round's secure-aggregation bytes are those each contributor would send and receive in the real protocol,
computed exactly from the message encodings: :func:`pategail.server.secagg.cost.round_bytes` without dropouts,
:func:`~pategail.server.secagg.cost.dropout_round_bytes` with them — a dropped device advertised its keys and
sent its shares before it stopped, and is counted those bytes (as a real round counts them); a survivor's bytes
depend on how many of its neighbours dropped, on a neighbour graph drawn from a round seed the fleet derives
from its seed. Dropouts that would leave the real round unable to unmask (a survivor or a dropped device's mask
key with fewer than t surviving holders, a survivor set too small to certify) abort the round as the protocol
does.

Not simulated (the SDK fleet has them): the cryptography itself (there are no device keys, so no public keys
are enrolled), the devices' own privacy ledgers (the coordinator's budget check still stops a run at its
target), and local generation with the policy (PolicyUpdate is checked and acknowledged).

Shards: the devices split into ``shards`` ranges of whole chunks (pategail.population.shard); with
``ray_address`` (or ``ray_workers``) each shard is a Ray actor (one thread each); with ``processes`` each
shard is a process of this machine (one thread each: numpy's small products hold the GIL, so threads in one
process stop scaling near 2 cores and processes are how one machine's cores are used); else an object of this
process whose chunks run on ``workers`` threads (default: one a core) — the result is the same numbers every
way (devices are computed in chunks of ``chunk`` consecutive ids, whatever the shards, threads or processes).
Remote shards (actors, processes) are all sent a request before any answer is awaited, so they work at once.
"""
from __future__ import annotations

import logging
import logging.handlers
import math
import multiprocessing
import os
import pickle
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from pategail.server.errors import PategailError
from pategail.sdk.bundle import load_bundle, open_training_session
from pategail.sdk.messages import (DEFAULT_LIMITS, KIND_CELL_RELEASE_REQUEST, KIND_FEDAVG_REQUEST,
                                   KIND_INITIAL_STATES_REQUEST, KIND_NAMES, KIND_POLICY_UPDATE, KIND_ROUND_REQUEST,
                                   Ack, CellReleaseRequest, ErrorReply, FedAvgRequest, InitialStatesRequest,
                                   MessageError, PolicyUpdate, RoundRequest, from_bytes, peek_round)
from pategail.sdk.secagg.config import COORDINATOR
from pategail.sdk.secagg.mechanisms import DELTA_BLOCK
from pategail.sdk.secagg.mechanisms import mechanism as mechanism_named
from pategail.sdk.secagg.errors import SecAggAbort
from pategail.sdk.secagg.fixedpoint import SCALE, decode

from .ideal import distributed_noise
from .resample import Population
from .shard import CHUNK, DeviceModel, PopulationShard, chunk_directory
from .stacked import Layout, OptimiserSettings

log = logging.getLogger(__name__)


def device_model(bundle_dir: Path, seed: int) -> DeviceModel:
    """The discriminator, optimiser and environment every device starts from, read from the bundle."""
    bundle = load_bundle(bundle_dir)
    env = bundle.environment
    assert env is not None                  # load_bundle: a fleet's bundle has an environment
    policy = None
    if bundle.policy_training is not None:
        from .fedavg import PolicyShape
        policy = PolicyShape(dict(bundle.manifest["policy"]["config"]),
                             tuple(name for name, _ in bundle.policy_training.parameters))
    return DeviceModel(open_training_session(bundle).get_flat_parameters(), Layout.of(bundle),
                       OptimiserSettings.of(bundle), np.asarray(env.cells, dtype=np.float64), float(env.alpha),
                       int(env.candidates), int(seed), bool(env.action_rates), policy=policy,
                       initial_states_days_cap=int(env.initial_states_days_cap))


def shard_ranges(n_devices: int, shards: int, chunk: int = CHUNK) -> list[tuple[int, int]]:
    """``shards`` ranges of consecutive device ids, each of whole chunks (the last may be shorter)."""
    chunks = math.ceil(n_devices / chunk)
    shards = max(1, min(shards, chunks))
    bounds = [round(i * chunks / shards) * chunk for i in range(shards + 1)]
    return [(lo, min(hi, n_devices)) for lo, hi in zip(bounds, bounds[1:]) if lo < min(hi, n_devices)]


def check_state_layout(state_dir: Path, n_devices: int, chunk: int) -> None:
    """PategailError when ``state_dir`` holds devices' state in another layout than chunks of ``chunk`` ids
    over ``n_devices`` (another population size, chunk, or an older version's per-shard files): resumed, those
    devices would silently start again from the bundle."""
    if not state_dir.is_dir():
        return
    expected = {chunk_directory(lo, min(lo + chunk, n_devices) - 1) for lo in range(0, n_devices, chunk)}
    foreign = sorted(p.name for p in state_dir.iterdir() if p.name.startswith("devices-") and p.name not in expected)
    if foreign:
        raise PategailError(f"{state_dir}: holds devices' state this fleet cannot read ({foreign[0]}: another "
                            f"population, chunk of devices, or version); resume it with the version and settings "
                            "that made it, or start again in another --out")


class _RayShard:
    """A shard running as a Ray actor: :meth:`submit` sends a call, the function it returns waits for the
    result."""

    def __init__(self, actor):
        self._actor = actor

    def submit(self, name: str, *args):
        import ray

        ref = getattr(self._actor, name).remote(*args)
        return lambda: ray.get(ref)


def _picklable(err: Exception) -> Exception:
    """``err`` if it crosses a pipe intact, else a RuntimeError saying what it was (some exceptions cannot be
    rebuilt from their pickled arguments)."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:                   # noqa: BLE001 — any failure to round-trip
        plain = RuntimeError(f"{type(err).__name__}: {err}")
        for note in getattr(err, "__notes__", ()):
            plain.add_note(note)
        return plain


def _serve_shard(conn, args: tuple, logs, level: int) -> None:
    """A shard process's life: build the shard, then answer ``(method, args)`` calls until ``None`` or the
    pipe closes. Each answer is ``(True, value)`` or ``(False, exception)`` (its traceback added as a note).
    Its log records go to the fleet's process (``logs``); Ctrl-C is the fleet's to handle; it ends with the
    fleet's process, however that ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None:              # a killed fleet must not leave a shard writing its state files
        threading.Thread(target=lambda: (parent.join(), os._exit(1)),  # type: ignore[func-returns-value]
                         daemon=True).start()
    root = logging.getLogger()
    root.handlers[:] = [logging.handlers.QueueHandler(logs)]
    root.setLevel(level)
    torch.set_num_threads(1)            # the processes are the parallelism
    try:
        shard = PopulationShard(*args)
    except Exception as err:            # noqa: BLE001 — handed to the fleet, which raises it
        err.add_note(traceback.format_exc())
        conn.send((False, _picklable(err)))
        return
    conn.send((True, None))
    while True:
        try:
            call = conn.recv()
        except EOFError:
            return
        if call is None:
            return
        name, call_args = call
        try:
            conn.send((True, getattr(shard, name)(*call_args)))
        except Exception as err:        # noqa: BLE001
            err.add_note(f"in the population shard process {os.getpid()}:\n{traceback.format_exc()}")
            conn.send((False, _picklable(err)))


class _LogRelay:
    """The shard processes' log records, handled in this process (train.log, the terminal) by one thread."""

    def __init__(self, context):
        self.queue = context.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True, name="pategail-shard-logs")
        self._thread.start()

    def _run(self) -> None:
        while (record := self.queue.get()) is not None:
            logging.getLogger(record.name).handle(record)

    def close(self) -> None:
        self.queue.put(None)
        self._thread.join(5)


class _ProcessShard:
    """A shard in a process of its own (started by ``spawn``: a fresh interpreter, so no thread pool of this
    process is inherited half-way), called through a pipe like a Ray actor."""

    def __init__(self, context, args: tuple, logs):
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve_shard, daemon=True,
                                        args=(child, args, logs, logging.getLogger("pategail").getEffectiveLevel()),
                                        name=f"pategail-shard-{args[0][0] if len(args[0]) else 0}")
        self._process.start()
        child.close()
        self._started = False

    def _ended(self) -> PategailError:
        self._process.join(5)
        if not self._started:
            return PategailError(f"a population shard process could not start (exit code {self._process.exitcode})")
        return PategailError(f"a population shard process ended (exit code {self._process.exitcode}); the run "
                             "can be resumed with --resume")

    def _answer(self):
        try:
            ok, value = self._conn.recv()
        except (EOFError, OSError):
            raise self._ended() from None
        if not ok:
            raise value
        return value

    def _refuse(self):
        raise self._ended()

    def ready(self) -> None:
        """Wait until the shard is built (its error, if it could not be)."""
        self._answer()
        self._started = True

    def submit(self, name: str, *args):
        try:
            self._conn.send((name, args))
        except OSError:                 # the process is gone: said when its answer is awaited
            return self._refuse
        return self._answer

    def ask_to_stop(self) -> None:
        try:
            self._conn.send(None)
        except OSError:
            pass

    def stop(self, deadline: float) -> None:
        """Wait for the process until ``deadline`` (time.monotonic), then terminate it."""
        self._process.join(max(0.0, deadline - time.monotonic()))
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5)
        self._conn.close()


def start_ray(address: str | None, workers: int | None):
    """Connect to the Ray cluster at ``address``, or start a local one with ``workers`` CPUs. One-line
    PategailError when ray is not installed."""
    try:
        import ray
    except ImportError:
        raise PategailError("--ray-address/--ray-workers need Ray: pip install 'pategail[ray]'") from None
    if not ray.is_initialized():
        if address is not None:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    return ray


class PopulationFleet:
    """N simulated devices; device i holds ``population.device_days(dataset, i)``. ``state_dir`` keeps the
    discriminators between rounds and across restarts (None: memory only)."""

    def __init__(self, dataset, population: Population, bundle_dir: Path, seed: int = 0,
                 state_dir: Path | None = None, *, dropout: float = 0.0, shards: int = 1,
                 ray_address: str | None = None, ray_workers: int | None = None, chunk: int = CHUNK,
                 workers: int | None = None, processes: int | None = None):
        if not 0 <= dropout < 1:
            raise PategailError(f"dropout must be in [0, 1), got {dropout}")
        if workers is not None and workers < 1:
            raise PategailError(f"the population fleet's threads must be at least 1, got {workers}")
        if processes is not None and processes < 1:
            raise PategailError(f"the population fleet's processes must be at least 1, got {processes}")
        if processes is not None and (ray_address is not None or ray_workers is not None):
            raise PategailError("the population fleet runs its shards on Ray or in processes, not both")
        t0 = time.perf_counter()
        self.population = population
        self.seed = seed
        self.dropout = dropout
        self.device_ids = tuple(range(len(population)))
        model = device_model(bundle_dir, seed)
        self._n_cells = len(model.cells)
        self.distributed = ray_address is not None or ray_workers is not None
        if self.distributed:
            ray = start_ray(ray_address, ray_workers)
            shards = max(shards, int(ray.cluster_resources().get("CPU", 1)))
            remote = ray.remote(num_cpus=1)(PopulationShard)
        if processes is not None:
            shards = max(shards, processes)
        self.ranges = shard_ranges(len(population), shards, chunk)
        if state_dir is not None:
            check_state_layout(Path(state_dir), len(population), chunk)
        self.processes = processes is not None
        self.shards: list[_RayShard | _ProcessShard | PopulationShard] = []
        self._logs: _LogRelay | None = None
        try:
            if self.processes:
                context = multiprocessing.get_context("spawn")
                self._logs = _LogRelay(context)
            for lo, hi in self.ranges:
                days = population.devices_days(dataset, lo, hi)
                where = None if state_dir is None else Path(state_dir)
                if self.distributed:
                    self.shards.append(_RayShard(remote.remote(np.arange(lo, hi), days, model, where, chunk)))
                elif self.processes:
                    assert self._logs is not None
                    self.shards.append(_ProcessShard(context, (np.arange(lo, hi), days, model, where, chunk, 1),
                                                     self._logs.queue))
                else:
                    self.shards.append(PopulationShard(np.arange(lo, hi), days, model, where, chunk,
                                                       workers or len(os.sched_getaffinity(0))))
            for shard in self.shards:             # processes: built at once, each in its own
                if isinstance(shard, _ProcessShard):
                    shard.ready()
        except BaseException:
            self.close()
            raise
        self._last: tuple[bytes, bytes] | None = None
        self._pending: np.ndarray | None = None
        self._pending_ids: frozenset[int] = frozenset()
        self._length = 0
        self._delta = False          # the pending sum is of DP-FedAvg deltas (summed at the request)
        self.setup_seconds = time.perf_counter() - t0
        how = " on Ray" if self.distributed else " (one process each)" if self.processes else ""
        log.info("population fleet: %d simulated devices (%s) in %d shard(s)%s, set up in %.1f s", len(population),
                 population.method, len(self.shards), how, self.setup_seconds)

    def _on_every_shard(self, name: str, *args) -> list:
        """``shard.name(*args)`` for every shard, in shard order; remote shards all start before any is
        awaited."""
        answers = [shard.submit(name, *args) if hasattr(shard, "submit") else None for shard in self.shards]
        results, failure = [], None
        for shard, answer in zip(self.shards, answers):
            try:                            # every answer is read, so that no pipe keeps a stale one
                results.append(getattr(shard, name)(*args) if answer is None else answer())
            except Exception as err:        # noqa: BLE001 — the first failure is raised below
                failure = failure or err
        if failure is not None:
            raise failure
        return results

    def close(self) -> None:
        """Stop the shard processes, all within one 10-second deadline (nothing to do for in-process shards or
        Ray actors)."""
        processes = [shard for shard in self.shards if isinstance(shard, _ProcessShard)]
        for shard in processes:
            shard.ask_to_stop()
        deadline = time.monotonic() + 10
        for shard in processes:
            shard.stop(deadline)
        if self._logs is not None:
            self._logs.close()
            self._logs = None

    def describe(self) -> dict:
        """report.json's ``fleet`` entry."""
        return {"kind": "population", "simulation": "ideal secure aggregation (exact sum + the protocol's noise)",
                "devices": len(self.device_ids), "shards": len(self.shards), "ray": self.distributed,
                "processes": len(self.shards) if self.processes else 0, "dropout": self.dropout}

    def public_keys(self) -> dict:
        """None: simulated devices hold no keys (the secure sum is the ideal functionality)."""
        return {}

    def request(self, device_id: int, message: bytes) -> bytes:
        if not 0 <= device_id < len(self.device_ids):
            raise KeyError(device_id)
        if self._last is None or (message is not self._last[0] and message != self._last[0]):
            self._last = (message, self._carry_out(message))
        return self._last[1]

    def _carry_out(self, message: bytes) -> bytes:
        """Carry ``message`` out on every device; the reply each of them gives."""
        try:
            msg = from_bytes(message, limits=DEFAULT_LIMITS, n_cells=self._n_cells,
                             expect=(PolicyUpdate, RoundRequest, InitialStatesRequest, FedAvgRequest,
                                     CellReleaseRequest))
        except MessageError as err:
            return ErrorReply.from_error(peek_round(message), err, DEFAULT_LIMITS).to_bytes()
        if isinstance(msg, PolicyUpdate):
            return Ack(msg.round, KIND_NAMES[KIND_POLICY_UPDATE], 0).to_bytes()
        t0 = time.perf_counter()
        if isinstance(msg, FedAvgRequest):
            self._pending = np.sum(self._on_every_shard("fedavg_request", msg), axis=0)
            self._length = len(self._pending)
            self._pending_ids = frozenset(self.device_ids)
            self._delta = True
            log.info("%s %d: %d devices in %.1f s", KIND_NAMES[KIND_FEDAVG_REQUEST], msg.round,
                     len(self.device_ids), time.perf_counter() - t0)
            return Ack(msg.round, KIND_NAMES[KIND_FEDAVG_REQUEST], self._length).to_bytes()
        self._delta = False
        if isinstance(msg, CellReleaseRequest):
            self._on_every_shard("cell_release_request", msg.max_cells)
            self._pending = np.zeros(2 * self._n_cells, dtype=np.int64)   # the uploads are taken at the sum
            self._length = self._n_cells
            self._pending_ids = frozenset(self.device_ids)
            return Ack(msg.round, KIND_NAMES[KIND_CELL_RELEASE_REQUEST], self._length).to_bytes()
        if isinstance(msg, RoundRequest):
            parts = self._on_every_shard("round_request", msg)
            kind = KIND_ROUND_REQUEST
        else:
            assert isinstance(msg, InitialStatesRequest)        # the only kind ``expect`` leaves
            parts = self._on_every_shard("environment_request", msg.region_cells)
            kind = KIND_INITIAL_STATES_REQUEST
        self._pending = np.sum(parts, axis=0)
        self._length = len(self._pending) // 2
        self._pending_ids = frozenset(self.device_ids)
        log.info("%s %d: %d devices in %.1f s", KIND_NAMES[kind], msg.round, len(self.device_ids),
                 time.perf_counter() - t0)
        return Ack(msg.round, KIND_NAMES[kind], self._length).to_bytes()

    def secure_sum(self, participants: Sequence[int], config, coordinator, rng: np.random.Generator,
                   num_queries: int):
        from pategail.server.secagg.cost import dropout_round_bytes, round_bytes
        from pategail.server.secagg.round import AggregateResult, RoundStats

        mechanism = getattr(config, "mechanism", "laplace")
        whole_vector = mechanism_named(mechanism).clips_whole_vector   # its upload: a function of the whole vector
        if self._pending is None or (num_queries != self._length and not whole_vector):
            raise ValueError(f"the devices hold {self._length} pending values, the round asks for {num_queries}")
        agg_id = COORDINATOR if config.aggregator == "coordinator" else int(rng.choice(sorted(participants)))
        contributors = sorted(set(participants) - {agg_id})
        m = num_queries
        if self.dropout:
            drop_rng = np.random.default_rng([self.seed, 0xD0, config.round_id])
            gone = drop_rng.choice(contributors, round(self.dropout * len(contributors)), replace=False)
            # the round's public seed (here drawn from the fleet's seed) places the dropped devices on the graph;
            # the real round would abort where the cost function does
            round_seed = np.random.default_rng([self.seed, 0x5EED, config.round_id]).bytes(32)
            cost_by_device = dropout_round_bytes(config, contributors, m, gone.tolist(), round_seed)
            contributors = sorted(set(contributors) - set(gone.tolist()))
        else:
            if len(contributors) < config.n_min:
                raise SecAggAbort(f"{len(contributors)} devices sent their masked input, fewer than n_min = "
                                  f"{config.n_min}: nothing is released")
            cost = round_bytes(config, len(contributors), m)
            cost_by_device = dict.fromkeys(contributors, cost)
        if self._delta:
            # DP-FedAvg: the devices' uploads were summed at the request (signed vectors of clip norm 1)
            if config.block != DELTA_BLOCK or abs(config.clip_norm - 1.0) > 1e-9 or m != self._length:
                raise ValueError("a DP-FedAvg round of the population fleet is a signed-vector Gaussian round of "
                                 "clip norm 1 over the pending deltas")
            if set(contributors) != self._pending_ids:
                raise PategailError("the population fleet simulates DP-FedAvg rounds without dropouts and with the "
                                    "coordinator aggregating; use --fleet sdk for those")
            total = np.zeros(2 * m, dtype=np.int64)
            total[:m] = self._pending
        elif whole_vector:
            # each device's upload is a clipped function of its own vector (centred block means, L2 norm ≤ C),
            # so the sum is taken over the contributors' uploads, recomputed from the shards' state
            total = np.zeros(2 * m, dtype=np.int64)          # slots m..2m-1: no Σ D² in this mechanism
            for part in self._on_every_shard("contributions", contributors, config):
                if part is not None:
                    total[:m] += part
        else:
            total = self._pending.copy()
            left_out = self._pending_ids - set(contributors)
            if left_out:
                for part in self._on_every_shard("contributions", sorted(left_out)):
                    if part is not None:
                        total -= part
        divisor = config.n_min - config.colluders
        if config.sum_noise_scale > 0:
            total[:m] += distributed_noise(config.sum_noise_scale * SCALE, divisor, len(contributors), m, mechanism)
        if config.sq_sum_noise_scale > 0:
            total[m:] += distributed_noise(config.sq_sum_noise_scale * SCALE, divisor, len(contributors), m, mechanism)
        # what each contributor, dropped or not, would send and receive in the real protocol
        up = {d: cost.up for d, cost in cost_by_device.items()}
        down = {d: cost.down for d, cost in cost_by_device.items()}
        stats = RoundStats(bytes_up=up, bytes_down=down, device_cpu_s={}, aggregator_cpu_s=0.0, coordinator_cpu_s=0.0)
        return AggregateResult(decode(total[:m]), decode(total[m:]), len(contributors), tuple(contributors),
                               agg_id, stats)

    def move_to_table(self, released: np.ndarray, bundle_dir: Path) -> None:
        """The run's privately released cell table is published (``released``: the public map's ids it keeps,
        sorted) with the bundle on it: every device moves its days onto it and takes the bundle
        (:meth:`PopulationShard.move_to_table`)."""
        model = device_model(bundle_dir, self.seed)
        self._on_every_shard("move_to_table", np.asarray(released, dtype=np.int64), model)
        self._n_cells = len(model.cells)
        self._last, self._pending, self._length = None, None, 0
        log.info("population fleet: %d devices moved their days onto the released table of %d squares",
                 len(self.device_ids), self._n_cells)

    def parameters(self) -> np.ndarray:
        """float32 (N, P): every device's discriminator, in device order."""
        return np.concatenate(self._on_every_shard("parameters"))
