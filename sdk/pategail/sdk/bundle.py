"""Load a model bundle on the device: verify it, then open ONNX Runtime sessions on it.

A bundle is a directory written by :func:`pategail.export.bundle.export_bundle`: the policy inference
model, the discriminator's on-device training artifacts and inference model, and ``manifest.json``
(format version, SHA-256 of every file, input/output names and shapes, parameter order, opset, IR version,
and the torch/onnx/onnxruntime versions that made it). :func:`load_bundle` refuses — with a one-line
:class:`BundleError` — a bundle whose files do not match their hashes, whose format version this SDK does
not read, or that the running onnxruntime cannot run. Torch-free (the SDK runs on phones).

Sessions use ONE intra-op thread: on a model this small, more threads are slower (measured) and
a phone app should not take every core.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pategail.sdk.contribution import DAYS_CAP
from pategail.sdk.epr import candidate_count, explore_rank_weights
from pategail.sdk.errors import BundleError
from pategail.sdk.places import PlaceLaw
from pategail.sdk.secagg.policy import DeclaredPlan

if TYPE_CHECKING:
    import onnxruntime as ort
    from onnxruntime.training.api import CheckpointState, Module, Optimizer

MANIFEST = "manifest.json"
FORMAT = "pategail-model-bundle"
FORMAT_VERSION = 1
"""The manifest layout this SDK reads (see :func:`pategail.export.bundle.build_manifest`)."""

POLICY = "policy"
DISCRIMINATOR_ROLES = ("training", "eval", "optimizer", "inference")


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output: name, element type ("float32", "int64", "bool", "seq(float32)"…) and shape
    (ints for fixed sizes, strings for dynamic axes such as "batch"; None where the graph gives none)."""

    name: str
    dtype: str
    shape: tuple[int | str, ...] | None


@dataclass(frozen=True)
class ModelSpec:
    """One ONNX model file of the bundle and its interface."""

    path: Path
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    ir_version: int
    opset: int

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.outputs)


CELLS_FILE = "cells.csv"
INITIAL_STATES_FILE = "initial_states.csv"
RELEVANCE_FILE = "relevance.csv"
UNIVERSE_FILE = "universe.csv"


@dataclass(frozen=True)
class Environment:
    """What a device needs besides the models to featurise days and to generate them: the cell table
    (float64 (n_cells, 2) lat, lon degrees), the EPR explore parameters (``explore_factors``, when the
    coordinator learned them, correct the power law per rank bin: pategail.sdk.epr) and, optionally, the
    distribution of initial states the coordinator released (int (k, 2) (home, first cell) rows with float
    weights (k,)) and the learned place law (d-EPR relevance per cell and return to the place just left;
    pategail.sdk.places)."""

    cells: np.ndarray
    alpha: float
    candidates: int
    initial_states: np.ndarray | None = None
    initial_weights: np.ndarray | None = None
    explore_factors: np.ndarray | None = None
    places: PlaceLaw | None = None
    action_rates: bool = False
    """Devices add the action-rate part to their environment vector (manifest "environment.action_rates";
    pategail.sdk.action_rates) — for the coordinator's rule-model warm start. Absent: False, the layout as
    before."""
    max_day_cells: int | None = None
    """The environment's limit on distinct cells a generated day holds (manifest "environment.max_day_cells";
    :class:`pategail.sdk.epr.EPREnvironment`): once a day holds that many, no action may add one (no explore,
    no first move home). Absent: None, no limit."""
    initial_states_days_cap: int = DAYS_CAP
    """Days at which a device's initial-state contribution (home, first cell) reaches full weight
    (manifest "environment.initial_states_days_cap"; pategail.sdk.contribution). Absent: ``DAYS_CAP``, the
    cap of every other part of the environment vector."""
    universe: np.ndarray | None = None
    """A privately released cell table (``cells`` chosen from a public map by the run's first release:
    pategail.sdk.cell_universe): float64 (n_squares, 2) lat, lon of every square of that public map. The
    device's days stay on the public map (the app records them there); it moves them onto ``cells`` with
    ``table`` whenever it uses them. None: the days are on ``cells`` themselves."""
    table: np.ndarray | None = None
    """int64 (n_squares,): the cell of ``cells`` each square of ``universe`` moves to (a released square to
    itself, another to the nearest released one: pategail.sdk.cell_universe.release_mapping)."""

    @property
    def n_day_cells(self) -> int:
        """The number of cells the device's stored days are on: the public map's squares, or the cells."""
        return len(self.cells) if self.universe is None else len(self.universe)

    def on_table(self, days: np.ndarray) -> np.ndarray:
        """``days`` (cell ids on the public map when the table was released from one) on ``cells``."""
        days = np.asarray(days)
        if self.table is None:
            return days
        moved: np.ndarray = self.table.astype(days.dtype)[days]
        return moved

    def write(self, root: Path) -> dict[str, Any]:
        """Write the files into ``root``; return the manifest's "environment" section."""
        rows = "".join(f"{i},{lat!r},{lon!r}\n" for i, (lat, lon) in enumerate(self.cells.tolist()))
        (root / CELLS_FILE).write_text("cell,lat,lon\n" + rows, encoding="utf-8")
        section: dict[str, Any] = {"cells": CELLS_FILE, "n_cells": len(self.cells), "alpha": float(self.alpha),
                   "candidates": int(self.candidates)}
        if self.explore_factors is not None:
            try:
                explore_rank_weights(candidate_count(len(self.cells), self.candidates), self.alpha,
                                     self.explore_factors)
            except ValueError as e:
                raise BundleError(f"environment: {e}") from None
            section["explore_factors"] = [float(f) for f in self.explore_factors]
        if self.initial_states is not None:
            assert self.initial_weights is not None       # given together
            rows = "".join(f"{h},{f},{w!r}\n" for (h, f), w in zip(self.initial_states.tolist(),
                                                                   self.initial_weights.tolist()))
            (root / INITIAL_STATES_FILE).write_text("home,first,weight\n" + rows, encoding="utf-8")
            section["initial_states"] = INITIAL_STATES_FILE
        if self.places is not None:
            if len(self.places.relevance) != len(self.cells):
                raise BundleError("environment: the place law and the cell table differ in cells")
            rows = "".join(f"{i},{r!r}\n" for i, r in enumerate(self.places.relevance.tolist()))
            (root / RELEVANCE_FILE).write_text("cell,relevance\n" + rows, encoding="utf-8")
            section["relevance"] = RELEVANCE_FILE
            section["return_last"] = self.places.return_last
        if self.action_rates:
            section["action_rates"] = True
        if self.max_day_cells is not None:
            if not _whole(self.max_day_cells, 1):
                raise BundleError("environment: max_day_cells must be a whole number of cells >= 1")
            section["max_day_cells"] = self.max_day_cells
        if self.initial_states_days_cap != DAYS_CAP:
            if not _whole(self.initial_states_days_cap, 1):
                raise BundleError("environment: initial_states_days_cap must be a whole number of days >= 1")
            section["initial_states_days_cap"] = self.initial_states_days_cap
        if self.universe is not None:
            assert self.table is not None        # given together
            try:
                _check_universe(self.cells, self.universe, self.table)
            except ValueError as e:
                raise BundleError(f"environment: {e}") from None
            rows = "".join(f"{i},{lat!r},{lon!r},{c}\n" for i, ((lat, lon), c) in
                           enumerate(zip(self.universe.tolist(), self.table.tolist())))
            (root / UNIVERSE_FILE).write_text("square,lat,lon,cell\n" + rows, encoding="utf-8")
            section["universe"], section["n_universe"] = UNIVERSE_FILE, len(self.universe)
        return section

    @classmethod
    def read(cls, root: Path, section: dict[str, Any]) -> "Environment":
        cells = _read_table(root / section["cells"], "cell,lat,lon")[:, 1:]
        if len(cells) != section["n_cells"] or not np.isfinite(cells).all() or (np.abs(cells) > [90, 180]).any():
            raise BundleError(f"{root / section['cells']}: cell table inconsistent with the manifest")
        states = weights = None
        if "initial_states" in section:
            table = _read_table(root / section["initial_states"], "home,first,weight")
            states, weights = table[:, :2].astype(np.int64), table[:, 2]
            if len(table) == 0 or states.min() < 0 or states.max() >= len(cells) or not (weights >= 0).all() \
                    or weights.sum() <= 0:
                raise BundleError(f"{root / section['initial_states']}: invalid initial states")
        factors = None
        if "explore_factors" in section:
            try:
                factors = np.asarray(section["explore_factors"], dtype=np.float64)
                explore_rank_weights(candidate_count(len(cells), section["candidates"]), section["alpha"], factors)
            except (ValueError, TypeError) as e:
                raise BundleError(f"{root / MANIFEST}: environment: {e}") from None
        places = None
        if "relevance" in section:
            table = _read_table(root / section["relevance"], "cell,relevance")
            try:
                if len(table) != len(cells) or (table[:, 0] != np.arange(len(cells))).any():
                    raise ValueError("one row per cell, in order")
                places = PlaceLaw(table[:, 1], float(section.get("return_last", 0.0)))
            except (ValueError, TypeError) as e:
                raise BundleError(f"{root / section['relevance']}: invalid place law ({e})") from None
        action_rates = section.get("action_rates", False)
        if not isinstance(action_rates, bool):
            raise BundleError(f"{root / MANIFEST}: environment: action_rates must be true or false")
        max_day_cells = section.get("max_day_cells")
        if max_day_cells is not None and not _whole(max_day_cells, 1):
            raise BundleError(f"{root / MANIFEST}: environment: max_day_cells must be a whole number of cells >= 1")
        days_cap = section.get("initial_states_days_cap", DAYS_CAP)
        if not _whole(days_cap, 1):
            raise BundleError(f"{root / MANIFEST}: environment: initial_states_days_cap must be a whole number of "
                              "days >= 1")
        universe = moves = None
        if "universe" in section:
            rows = _read_table(root / section["universe"], "square,lat,lon,cell")
            try:
                if len(rows) != section["n_universe"] or (rows[:, 0] != np.arange(len(rows))).any():
                    raise ValueError("one row per square of the public map, in order")
                universe, column = rows[:, 1:3], rows[:, 3]
                if (column != np.round(column)).any():
                    raise ValueError("cell ids must be integers")
                moves = column.astype(np.int64)
                _check_universe(cells, universe, moves)
            except (ValueError, TypeError) as e:
                raise BundleError(f"{root / section['universe']}: invalid public map ({e})") from None
        return cls(cells=cells, alpha=float(section["alpha"]), candidates=int(section["candidates"]),
                   initial_states=states, initial_weights=weights, explore_factors=factors, places=places,
                   action_rates=action_rates, max_day_cells=max_day_cells, initial_states_days_cap=days_cap,
                   universe=universe, table=moves)


def _whole(value: Any, least: int) -> bool:
    """``value`` is an int (not a bool) of at least ``least``: a manifest's count."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _check_universe(cells: np.ndarray, universe: np.ndarray, table: np.ndarray) -> None:
    """ValueError unless ``table`` moves every square of ``universe`` to a cell of ``cells`` and every cell is a
    square of the public map that moves to itself (the released table is a subset of the map)."""
    universe, table = np.asarray(universe, dtype=np.float64), np.asarray(table)
    if universe.ndim != 2 or universe.shape[1] != 2 or table.shape != (len(universe),):
        raise ValueError("the public map needs (lat, lon) and a cell for every square")
    if not np.isfinite(universe).all() or (np.abs(universe) > [90, 180]).any():
        raise ValueError("coordinates out of range")
    if len(table) and (table.min() < 0 or table.max() >= len(cells)):
        raise ValueError(f"a square moves to a cell outside the table of {len(cells)}")
    itself = np.all(universe == np.asarray(cells)[table], axis=1)
    if (np.bincount(table[itself], minlength=len(cells)) == 0).any():
        raise ValueError("a cell of the table is no square of the public map that moves to itself")


def _read_table(path: Path, header: str) -> np.ndarray:
    """float64 (rows, columns) of a CSV table with the exact ``header``; every row has its columns."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != header:
        raise BundleError(f"{path}: header must be {header!r}")
    rows, commas = lines[1:], header.count(",")
    if any(line.count(",") != commas for line in rows):
        raise BundleError(f"{path}: malformed row")
    if not rows:
        return np.empty((0, commas + 1))
    try:                        # numpy parses the numbers: about twice as fast as a float() a field
        return np.array(",".join(rows).split(","), dtype=np.float64).reshape(len(rows), commas + 1)
    except ValueError:
        raise BundleError(f"{path}: malformed row") from None


@dataclass(frozen=True)
class Bundle:
    """A verified bundle. ``discriminator`` maps "training", "eval", "optimizer", "inference" to models;
    ``parameters`` lists (name, shape) of the discriminator's trainable parameters in the order of the flat
    vector of ``get_contiguous_parameters``; ``manifest`` is the parsed manifest.json."""

    root: Path
    manifest: dict[str, Any]
    policy: ModelSpec
    discriminator: dict[str, ModelSpec]
    checkpoint: Path
    parameters: tuple[tuple[str, tuple[int, ...]], ...]
    environment: Environment | None = None
    """None for a models-only bundle (``pategail export --n-cells``), which devices cannot run."""
    policy_step: ModelSpec | None = None
    """The incremental policy model (key/value cache; :mod:`pategail.sdk.decoding`); None in bundles
    written before it existed, which generate from the full prefix."""
    privacy: DeclaredPlan | None = None
    """The run's declared privacy plan (manifest "privacy"): the device's floors and its own budget; None
    for a run without noise or a bundle written before plans were declared."""
    policy_training: "PolicyTrainingSpec | None" = None
    """The policy's maximum-likelihood training artifacts (manifest "policy_training"; DP-FedAvg runs,
    :mod:`pategail.sdk.fedavg_round`); None in other bundles."""

    @property
    def sha256(self) -> str:
        """Identity of the bundle: the SHA-256 of its manifest (which holds the hash of every file)."""
        return sha256_file(self.root / MANIFEST)

    @property
    def n_parameters(self) -> int:
        return int(sum(np.prod(shape, dtype=np.int64) for _, shape in self.parameters))

    @property
    def learning_rate(self) -> float:
        """The recommended discriminator learning rate (devices may choose another)."""
        return float(self.manifest["discriminator"]["optimizer"]["learning_rate"])


@dataclass(frozen=True)
class PolicyTrainingSpec:
    """The manifest's ``policy_training`` section: the training, eval and (SGD) optimizer models, the initial
    checkpoint, and the trainable parameters (name, shape) in flat-vector order."""

    models: dict[str, ModelSpec]
    checkpoint: Path
    parameters: tuple[tuple[str, tuple[int, ...]], ...]
    learning_rate_scale: float = 1.0
    """What the optimizer model's learning rate is the SGD rate times (``optimizer.learning_rate_scale``;
    :data:`pategail.sdk.fedavg_round.SGD_LEARNING_RATE_SCALE`)."""

    @property
    def n_parameters(self) -> int:
        return int(sum(np.prod(shape, dtype=np.int64) for _, shape in self.parameters))


def _policy_training(root: Path, section: dict[str, Any] | None,
                     requires: dict[str, Any]) -> PolicyTrainingSpec | None:
    if section is None:
        return None
    models = {role: _model(root, section["models"][role], requires) for role in ("training", "eval", "optimizer")}
    parameters = tuple((str(p["name"]), tuple(int(s) for s in p["shape"])) for p in section["parameters"])
    scale = float(section.get("optimizer", {}).get("learning_rate_scale", 1.0))
    if not (math.isfinite(scale) and scale > 0):
        raise BundleError(f"{root / MANIFEST}: policy_training: the optimizer's learning_rate_scale must be > 0")
    spec = PolicyTrainingSpec(models, root / section["checkpoint"], parameters, scale)
    if spec.n_parameters != int(section["n_parameters"]):
        raise BundleError(f"{root / MANIFEST}: policy_training: the parameter shapes do not add up to n_parameters")
    return spec


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def parse_version(text: str) -> tuple[int, ...]:
    """(1, 19, 2) from "1.19.2" (local or pre-release suffixes such as "+cpu" or "rc1" are ignored)."""
    m = re.match(r"^\s*(\d+(?:\.\d+)*)", str(text))
    if not m:
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def check_runtime(requires: dict[str, Any], running: str) -> None:
    """Raise BundleError unless ``requires["onnxruntime_min"] <= running < requires["onnxruntime_below"]``."""
    lo, hi = requires["onnxruntime_min"], requires["onnxruntime_below"]
    v = parse_version(running)
    if not (parse_version(lo) <= v < parse_version(hi)):
        raise BundleError(f"bundle needs onnxruntime >= {lo} and < {hi}, but onnxruntime {running} is installed")


def _tensor(d: dict[str, Any]) -> TensorSpec:
    shape = d.get("shape")
    return TensorSpec(str(d["name"]), str(d["dtype"]), None if shape is None else tuple(shape))


def _model(root: Path, d: dict[str, Any], requires: dict[str, Any]) -> ModelSpec:
    spec = ModelSpec(root / d["file"], tuple(_tensor(t) for t in d["inputs"]),
                     tuple(_tensor(t) for t in d["outputs"]), int(d["ir_version"]), int(d["opset"]))
    if spec.ir_version > requires["max_ir_version"] or spec.opset > requires["max_opset"]:
        raise BundleError(f"{d['file']}: IR {spec.ir_version} / opset {spec.opset} above what the bundle allows "
                          f"(IR <= {requires['max_ir_version']}, opset <= {requires['max_opset']})")
    return spec


def load_bundle(path: str | os.PathLike[str], *, onnxruntime_version: str | None = None) -> Bundle:
    """Read ``path``/manifest.json, verify the format version, every file's SHA-256 and size, and that the
    running onnxruntime (or ``onnxruntime_version``, for tests) is within the bundle's range.

    Raises :class:`BundleError` with a one-line reason on any mismatch.
    """
    root = Path(path)
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        raise BundleError(f"{root}: not a model bundle (no {MANIFEST}); make one with `pategail export`")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BundleError(f"{manifest_path}: not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{manifest_path}: not a {FORMAT} manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise BundleError(f"{manifest_path}: format version {manifest.get('format_version')!r}; this SDK reads "
                          f"version {FORMAT_VERSION} — export the bundle again or update the SDK")
    try:
        files = manifest["files"]
        requires = manifest["requires"]
        if onnxruntime_version is None:
            import onnxruntime
            onnxruntime_version = onnxruntime.__version__
        check_runtime(requires, onnxruntime_version)
        for name, entry in files.items():
            fp = root / name
            if Path(name).name != name:
                raise BundleError(f"{manifest_path}: file name {name!r} is not a plain name in the bundle")
            if not fp.is_file():
                raise BundleError(f"{root}: {name} is missing")
            if fp.stat().st_size != entry["bytes"] or sha256_file(fp) != entry["sha256"]:
                raise BundleError(f"{fp}: SHA-256 does not match the manifest (file altered or truncated)")
        policy = _model(root, manifest["policy"]["model"], requires)
        step = manifest["policy"].get("step_model")
        policy_step = None if step is None else _model(root, step, requires)
        disc = manifest["discriminator"]
        models = {role: _model(root, disc["models"][role], requires) for role in DISCRIMINATOR_ROLES}
        checkpoint = root / disc["checkpoint"]
        parameters = tuple((str(p["name"]), tuple(int(s) for s in p["shape"])) for p in disc["parameters"])
        # what earlier versions could declare and this one no longer does: refused, never silently ignored
        retired = [name for name in ("replay", "input_scaling") if disc.get(name) not in (None, "raw")]
        if retired:
            raise BundleError(f"{manifest_path}: the discriminator declares {' and '.join(retired)}, which this "
                              "version of the SDK does not do; export the bundle again")
        policy_training = _policy_training(root, manifest.get("policy_training"), requires)
        environment = None
        if "environment" in manifest:
            env = manifest["environment"]
            for key in ("cells", "initial_states", "relevance", "universe"):
                if key in env and env[key] not in files:
                    raise BundleError(f"{manifest_path}: {env[key]} is used but has no hash in 'files'")
            environment = Environment.read(root, env)
            if len(environment.cells) != manifest["policy"]["config"]["n_cells"]:
                raise BundleError(f"{manifest_path}: the cell table and the policy disagree on the number of cells")
    except BundleError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise BundleError(f"{manifest_path}: malformed manifest ({type(e).__name__}: {e})") from None
    listed = set(files)
    for spec_path in [policy.path, checkpoint, *(m.path for m in models.values()),
                      *([] if policy_step is None else [policy_step.path]),
                      *([] if policy_training is None else [policy_training.checkpoint,
                                                            *(m.path for m in policy_training.models.values())])]:
        if spec_path.name not in listed:
            raise BundleError(f"{manifest_path}: {spec_path.name} is used but has no hash in 'files'")
    privacy = None
    if "privacy" in manifest:
        try:
            privacy = DeclaredPlan.from_manifest(manifest["privacy"])
        except (KeyError, TypeError, ValueError) as e:
            raise BundleError(f"{manifest_path}: invalid privacy plan ({type(e).__name__}: {e})") from None
    return Bundle(root=root, manifest=manifest, policy=policy, discriminator=models, checkpoint=checkpoint,
                  parameters=parameters, environment=environment, policy_step=policy_step, privacy=privacy,
                  policy_training=policy_training)


def session_options(threads: int = 1, *, arena: bool = True) -> ort.SessionOptions:
    """onnxruntime.SessionOptions with ``threads`` intra-op threads (1 on devices) and one inter-op thread.

    ``arena=False`` turns ONNX Runtime's CPU memory arena off: each run then frees its activations instead of
    keeping the largest batch's buffers for the life of the session. For sessions a device keeps between
    rounds (the discriminator's) and one-off probes; generation, which runs the same shapes many times, keeps
    the arena (BENCHMARKS.md, "Memory of the SDK fleet")."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.enable_cpu_mem_arena = arena
    return so


def open_policy_session(bundle: Bundle, *, threads: int = 1) -> ort.InferenceSession:
    """An InferenceSession on the policy model (use with :func:`pategail.sdk.generate.generate_days`)."""
    import onnxruntime as ort

    return ort.InferenceSession(str(bundle.policy.path), session_options(threads),
                                providers=["CPUExecutionProvider"])


def open_generation_session(bundle: Bundle, *, threads: int = 1) -> ort.InferenceSession:
    """The session :func:`pategail.sdk.generate.generate_days` should use: the incremental policy model when
    the bundle has one (one slot a step, key/value cache), else the full-prefix model."""
    import onnxruntime as ort

    if bundle.policy_step is None:
        return open_policy_session(bundle, threads=threads)
    return ort.InferenceSession(str(bundle.policy_step.path), session_options(threads),
                                providers=["CPUExecutionProvider"])


def open_scoring_session(bundle: Bundle, *, threads: int = 1) -> ort.InferenceSession:
    """An InferenceSession on the discriminator inference model (the bundle's initial parameters):
    pairs (batch, 15) → logit, prob."""
    import onnxruntime as ort

    return ort.InferenceSession(str(bundle.discriminator["inference"].path), session_options(threads),
                                providers=["CPUExecutionProvider"])


class TrainingSession:
    """The discriminator's on-device training state: ``state`` (CheckpointState), ``module`` (training and
    eval models) and ``optimizer`` (AdamW + gradient clipping, as baked into the optimizer model).

    Labels: 1 = expert (the owner's real pairs), 0 = generated pairs.
    """

    def __init__(self, bundle: Bundle, state: CheckpointState, module: Module, optimizer: Optimizer) -> None:
        self.bundle = bundle
        self.state = state
        self.module = module
        self.optimizer = optimizer

    def train_step(self, pairs: np.ndarray, labels: np.ndarray) -> float:
        """One AdamW step on a batch; returns the loss before the step."""
        self.module.train()
        loss = self.module(np.ascontiguousarray(pairs, dtype=np.float32),
                           np.ascontiguousarray(labels, dtype=np.float32))[0]
        self.optimizer.step()
        self.module.lazy_reset_grad()
        return float(loss)

    def score(self, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(logit, prob) float32 (batch,) under the current parameters (the eval model; labels unused)."""
        self.module.eval()
        pairs = np.ascontiguousarray(pairs, dtype=np.float32)
        _, logit, prob = self.module(pairs, np.zeros(len(pairs), dtype=np.float32))
        return logit, prob

    def set_learning_rate(self, learning_rate: float) -> None:
        self.optimizer.set_learning_rate(float(learning_rate))

    def get_flat_parameters(self) -> np.ndarray:
        """float32 (n_parameters,): the trainable parameters in ``bundle.parameters`` order."""
        flat: np.ndarray = self.module.get_contiguous_parameters(trainable_only=True).numpy().copy()
        return flat

    def set_flat_parameters(self, flat: np.ndarray) -> None:
        from onnxruntime import OrtValue

        flat = np.ascontiguousarray(flat, dtype=np.float32)
        if flat.shape != (self.bundle.n_parameters,):
            raise ValueError(f"expected {self.bundle.n_parameters} parameters, got shape {flat.shape}")
        # the training API takes the C-level OrtValue (get_contiguous_parameters returns one too)
        self.module.copy_buffer_to_parameters(OrtValue.ortvalue_from_numpy(flat)._ortvalue, trainable_only=True)

    def save_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Write the parameters (and optimizer state) so a later session can resume from them."""
        from onnxruntime.training.api import CheckpointState

        CheckpointState.save_checkpoint(self.state, os.fspath(path), include_optimizer_state=True)


def ensure_training_api() -> None:
    """Make ``onnxruntime.training.api`` importable without torch.

    The training API (CheckpointState, Module, Optimizer) needs only onnxruntime's C++ core, but the Python
    package ``onnxruntime.training`` imports torch in its ``__init__`` (for ORTModule and the fp16 optimizers,
    onnxruntime-training 1.19.2). Where that import fails — a device has no torch — the package is replaced by
    a bare namespace over the same directory, so its ``api`` submodule loads on its own. Where torch is
    importable nothing changes.
    """
    if "onnxruntime.training.api" in sys.modules:
        return
    try:
        if importlib.util.find_spec("torch") is None:
            raise ImportError("no torch")           # don't half-import the package (it would pull in onnx)
        import onnxruntime.training.api  # noqa: F401
    except ImportError:
        import onnxruntime

        package = types.ModuleType("onnxruntime.training")
        package.__path__ = [str(Path(onnxruntime.__file__).parent / "training")]
        package.__package__ = "onnxruntime.training"
        sys.modules["onnxruntime.training"] = package
        import onnxruntime.training.api  # noqa: F401,F811


def open_training_session(bundle: Bundle, checkpoint: str | os.PathLike[str] | None = None, *,
                          threads: int = 1) -> TrainingSession:
    """Open the discriminator's training artifacts from ``bundle``, starting from ``checkpoint`` (a file
    written by :meth:`TrainingSession.save_checkpoint`, e.g. this device's discriminator from the last
    round) or from the bundle's initial checkpoint. The learning rate starts at the manifest's value."""
    ensure_training_api()
    from onnxruntime.training.api import CheckpointState, Module, Optimizer

    ckpt = Path(checkpoint) if checkpoint is not None else bundle.checkpoint
    if not ckpt.is_file():
        raise BundleError(f"{ckpt}: no such checkpoint")
    state = CheckpointState.load_checkpoint(os.fspath(ckpt))
    # no arena: the session lives as long as the device, and an arena would hold the buffers of its largest
    # batch (the scoring of a round's generated pairs) between rounds: 4.6 MiB a device instead of 1.3
    module = Module(os.fspath(bundle.discriminator["training"].path), state,
                    os.fspath(bundle.discriminator["eval"].path), session_options=session_options(threads, arena=False))
    optimizer = Optimizer(os.fspath(bundle.discriminator["optimizer"].path), module)
    optimizer.set_learning_rate(bundle.learning_rate)
    return TrainingSession(bundle, state, module, optimizer)
