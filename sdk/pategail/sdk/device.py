"""The device client: what a phone app embeds (the Android demo mirrors this reference implementation).

A :class:`Device` owns one directory — the app's private storage; in the emulator, one directory per
device — and everything in it:

- ``days.npy``               the owner's days (:class:`~pategail.sdk.store.TrajectoryStore`); never sent. On
  a privately released cell table they stay on the public map it was released from, and are moved onto the
  table whenever they are used (the bundle's ``Environment.table``);
- ``bundle/``                the verified model bundle (:mod:`pategail.sdk.install`);
- ``discriminator.ckpt``     the personal discriminator D_u and its bundle tag (:mod:`pategail.sdk.checkpoint`);
- ``policy.onnx``, ``policy.json``  the latest policy accepted from the coordinator
  (:mod:`pategail.sdk.policy_update`);
- ``identity.key``           the secure-aggregation identity (:mod:`pategail.sdk.identity`);
- ``secagg-rounds.json``     the last secure-aggregation round accepted per coordinator key (replay guard,
  :mod:`pategail.sdk.secagg.replay`);
- ``privacy-ledger.json``    the releases the device took part in, against the bundle's declared budget
  (:mod:`pategail.sdk.budget`);
- ``privacy-plan.json``      the last privacy plan a bundle declared: floors and budget stay in force under a
  later bundle that declares none, until the owner calls :meth:`Device.forget_privacy_plan`.

The coordinator reaches the device only through :meth:`Device.handle` (bytes in, bytes out; see
:mod:`pategail.sdk.messages`) and, for the secure aggregation that follows, through
:meth:`Device.secagg_step` (frames in, frame out), whose masked upload carries the device's pending vector —
the clipped scores D_u(s, a) of the last RoundRequest (:mod:`pategail.sdk.discriminator_round`), its
environment contribution (:mod:`pategail.sdk.contribution`), its clipped model delta (DP-FedAvg) or its visited
squares of the public map (a run's cell-table release, :mod:`pategail.sdk.cell_universe`). The caller never
supplies (or sees) that vector. A refused request changes nothing: checkpoint, pending vector and policy stay as
they were. A device whose bundle declares the run's privacy plan refuses a request past its own budget
(ErrorReply ``budget``) and a signed round configuration below the plan's floors
(:class:`~pategail.sdk.secagg.policy.DevicePolicy`).

Torch-free: numpy, onnxruntime (training build) and cryptography only.
"""
from __future__ import annotations

import logging
import struct
import os
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from pategail.sdk import checkpoint, policy_update
from pategail.sdk.budget import check_request_budget, device_ledger, forget_plan, plan_in_force
from pategail.sdk.bundle import (MANIFEST, Bundle, Environment, TrainingSession, ensure_training_api,
                                 open_generation_session)
from pategail.sdk.checkpoint import CHECKPOINT
from pategail.sdk.contribution import env_l1_bound, reward_vector
from pategail.sdk.environment_vector import environment_vector
from pategail.sdk.discriminator_round import positive_pairs, train_and_score
from pategail.sdk.epr import CellGeometry
from pategail.sdk.errors import BundleError, DeviceError
from pategail.sdk.features import N_PAIR_FEATURES, infer_home
from pategail.sdk.generate import GeneratedDays, generate_days
from pategail.sdk.identity import IDENTITY_FILE, load_or_create_identity
from pategail.sdk.install import BUNDLE_DIR, install_bundle, open_installed
from pategail.sdk.messages import (BUDGET, DEFAULT_LIMITS, INCOMPATIBLE, KIND_CELL_RELEASE_REQUEST,
                                   KIND_FEDAVG_REQUEST, KIND_INITIAL_STATES_REQUEST, KIND_NAMES, KIND_POLICY_UPDATE,
                                   KIND_ROUND_REQUEST, NON_FINITE, NOT_READY, Ack, CellReleaseRequest, ErrorReply,
                                   FedAvgRequest, InitialStatesRequest, MessageError, MessageLimits, PolicyUpdate,
                                   RoundRequest, from_bytes, peek_round)
from pategail.sdk.secagg.client import SecAggClient
from pategail.sdk.secagg.config import DevicePublicKeys, KeyDirectory
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.sdk.secagg.replay import RoundLog
from pategail.sdk.secagg.errors import MessageRejected, ProtocolError, RoundRefused, SecAggError
from pategail.sdk.secagg_endpoint import SECAGG_FRAMES, PendingVector, SecAggEndpoint
from pategail.sdk.store import TrajectoryStore

if TYPE_CHECKING:
    import onnxruntime as ort

    from pategail.sdk.fedavg_round import LabelledDays, PolicyTrainer

log = logging.getLogger(__name__)
ROUND_LOG_FILE = "secagg-rounds.json"
"""Last secure-aggregation round accepted per coordinator key: a restarted app must not reopen old rounds."""


class Device:
    """One device: its trajectory store, model bundle, personal discriminator, policy and secure-aggregation
    identity, all under ``root`` (see the module docstring). ``rng`` drives minibatch sampling; ``limits``
    bound the requests it accepts. A device restarted on the same ``root`` resumes where it was (bundle,
    discriminator checkpoint, accepted policy, identity); a pending vector does not survive a restart."""

    def __init__(self, root: str | os.PathLike[str], device_id: int, *, rng: np.random.Generator,
                 limits: MessageLimits = DEFAULT_LIMITS) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.device_id = int(device_id)
        self.rng = rng
        self.limits = limits
        self.store = TrajectoryStore(self.root)
        self.identity = load_or_create_identity(self.root / IDENTITY_FILE)
        ensure_training_api()
        self.bundle: Bundle | None = None
        self._bundle_sha256: str | None = None
        self._session: TrainingSession | None = None
        self._policy: ort.InferenceSession | None = None   # opened on the first generate() (_generation_session)
        self._policy_path: Path | None = None
        self._policy_sha256: str | None = None
        self._step_session: ort.InferenceSession | None = None
        self._pending = PendingVector()
        self._positives: np.ndarray | None = None
        self._home: int | None = None                 # the owner's home on the bundle's cell table
        self._geometry: CellGeometry | None = None
        self._secagg: SecAggClient | None = None
        self._secagg_directory: KeyDirectory | None = None
        self._secagg_plan: DeclaredPlan | None = None
        self._trainer: PolicyTrainer | None = None  # the policy's training session (DP-FedAvg), opened on demand
        self._labelled: LabelledDays | None = None
        if (self.root / BUNDLE_DIR / MANIFEST).is_file():
            try:
                self._open(open_installed(self.root))
            except BundleError as err:
                log.warning("device %d: the installed bundle is unusable (%s); install one again",
                            self.device_id, err)
                self.bundle = self._session = self._policy = self._policy_path = None

    # -- local API (the app) ---------------------------------------------------------------------------------
    def add_days(self, days: ArrayLike) -> int:
        """Store more of the owner's days (int (n, 48); cell ids checked against the bundle's cell table once
        one is installed). Returns the number of days stored."""
        n = self.store.add_days(days)
        self._positives = self._labelled = self._home = None
        return n

    @property
    def n_cells(self) -> int | None:
        """The cells of the installed bundle's table (what requests and generated days refer to)."""
        return None if self.bundle is None else len(self._environment.cells)

    def days(self) -> np.ndarray:
        """int32 (n, 48): the owner's days on the installed bundle's cell table (moved there from the public
        map when the table was released from one); the stored days as they are without a bundle."""
        days = self.store.days()
        return days if self.bundle is None else self._environment.on_table(days)

    @property
    def home(self) -> int:
        """The owner's home cell on the installed bundle's table (the most visited night cell of
        :meth:`days`), cached until days are added or another table is installed. DataError without days."""
        if self.bundle is None or self._environment.table is None:
            return self.store.home
        if self._home is None:
            if not len(self.store):
                return self.store.home                   # the store's own error
            self._home = infer_home(self.days())
        return self._home

    @property
    def _installed(self) -> Bundle:
        """The installed bundle, where the caller has made sure there is one."""
        assert self.bundle is not None
        return self.bundle

    @property
    def _environment(self) -> Environment:
        """The installed bundle's environment (installing refuses a bundle without one)."""
        env = self._installed.environment
        assert env is not None
        return env

    @property
    def public_keys(self) -> DevicePublicKeys:
        """What the coordinator enrols (out of band, e.g. at app install)."""
        return DevicePublicKeys(self.identity.signing_public, self.identity.envelope_public)

    @property
    def checkpoint_path(self) -> Path:
        return self.root / CHECKPOINT

    @property
    def policy_sha256(self) -> str | None:
        """SHA-256 of the policy model in use (the bundle's, or the latest accepted PolicyUpdate)."""
        return self._policy_sha256

    @property
    def pending(self) -> np.ndarray | None:
        """A copy of the vector the next secure aggregation will upload (masked), or None."""
        return self._pending.peek()

    @property
    def secagg(self) -> SecAggClient | None:
        """The secure-aggregation client (created by the first :meth:`secagg_step`)."""
        return self._secagg

    def discriminator_parameters(self) -> np.ndarray:
        """float32 (n_parameters,): D_u's parameters in the manifest's ``parameters`` order."""
        return self._require_session().get_flat_parameters()

    def score(self, pairs: np.ndarray) -> np.ndarray:
        """float64 (batch,): D_u(s, a) ∈ [0, 1] of ``pair_features`` rows (batch, 15), for the app's own use."""
        pairs = np.asarray(pairs, dtype=np.float32).reshape(-1, N_PAIR_FEATURES)
        _, prob = self._require_session().score(pairs)
        return np.clip(prob.astype(np.float64), 0.0, 1.0)

    def generate(self, n_days: int, rng: np.random.Generator) -> GeneratedDays:
        """``n_days`` synthetic days made here with the policy in use and the EPR environment, starting from
        this device's own initial states (its home, first cells drawn from its days' first cells). Nothing
        leaves the device."""
        if self.bundle is None:
            raise DeviceError("no model bundle installed")
        days = self.days()
        if not len(days):
            raise DeviceError("the device holds no days to take initial states from")
        env = self._environment
        if self._geometry is None:
            self._geometry = CellGeometry.build(env.cells, env.candidates, lazy=True)
        first = rng.choice(days[:, 0], size=int(n_days))
        homes = np.full(int(n_days), self.home, dtype=np.int32)
        return generate_days(self._generation_session(), self._geometry, homes, first, rng, alpha=env.alpha,
                             explore_factors=env.explore_factors, places=env.places, max_cells=env.max_day_cells)

    def _generation_session(self) -> ort.InferenceSession:
        """The bundle's incremental policy model while the policy in use is the bundle's (it computes that
        policy only); the policy in use (full prefix) after a PolicyUpdate or with an older bundle."""
        bundle_policy = self._installed.manifest["files"][self._installed.policy.path.name]["sha256"]
        if self._installed.policy_step is None or self._policy_sha256 != bundle_policy:
            if self._policy is None:
                assert self._policy_path is not None and self._policy_sha256 is not None   # set with the bundle
                self._policy = policy_update.open_policy_file(self._policy_path, self._policy_sha256)
            return self._policy
        if self._step_session is None:
            self._step_session = open_generation_session(self._installed)
        return self._step_session

    def positive_pairs(self) -> np.ndarray:
        """float32 (n_days · 47, 15): the owner's real (state, action) pairs (cached until days are added)."""
        if self._positives is None:
            self._positives = positive_pairs(self._require_days(), self.home, self._environment.cells)
        return self._positives

    def release_sessions(self) -> None:
        """Close this device's ONNX Runtime sessions (the discriminator's training state, the policy); each
        reopens from the device's files when it is next needed. Nothing is lost: between requests the
        discriminator checkpoint on disk is the session's state (saved after every round), and a session
        reopened from it trains exactly as the one it replaces. For an app between rounds, and for the
        emulator, which holds many devices in one process (BENCHMARKS.md, "Memory of the SDK fleet")."""
        self._session = self._policy = self._step_session = self._trainer = None

    # -- bundle ----------------------------------------------------------------------------------------------
    def install_bundle(self, bundle_dir: str | os.PathLike[str], expected_sha256: str | None = None) -> Bundle:
        """Verify the bundle at ``bundle_dir`` (hashes, versions, runtime; ``expected_sha256`` if given),
        copy it into the device directory and open it. The discriminator checkpoint is kept if it belongs to
        this very bundle; otherwise (another bundle, or unreadable) the device starts again from the bundle's
        checkpoint and logs a warning. A bundle on a cell table released from a public map is taken only over
        days on that very map (the installed bundle's table or public map). Raises BundleError (nothing
        changed) when the bundle is refused."""
        day_cells, released = None, False
        if self.bundle is not None and len(self.store):
            env = self._environment
            day_cells, released = (env.cells, False) if env.universe is None else (env.universe, True)
        self._open(install_bundle(self.root, bundle_dir, expected_sha256, self.store.max_cell(), day_cells,
                                  released))
        return self._installed

    def _open(self, bundle: Bundle) -> None:
        sha = bundle.sha256
        # compare with the hash remembered at the last opening: Bundle.sha256 re-reads the (replaced) manifest
        changed = sha != self._bundle_sha256
        self.bundle, self._bundle_sha256 = bundle, sha
        self.store.n_cells = self._environment.n_day_cells
        if bundle.privacy is not None:
            plan_in_force(self.root, bundle.privacy)   # remembered: a later bundle without one keeps it in force
        self._session = checkpoint.open_checkpoint(self.root, bundle, self.device_id)
        self._step_session = self._policy = None    # belong to the bundle being replaced
        self._policy_path, self._policy_sha256 = policy_update.policy_in_use(self.root, bundle, self.device_id)
        if changed:
            self._pending.set(None)
            self._positives = self._geometry = self._labelled = self._home = None
        self._trainer = None

    # -- protocol --------------------------------------------------------------------------------------------
    def handle(self, request: bytes) -> bytes:
        """The only entry point for coordinator messages: decode and validate ``request`` and carry it out.
        Returns the reply's bytes — an Ack, or an ErrorReply when the request is refused, in which case the
        device's state (checkpoint, pending vector, policy) is exactly as before."""
        try:
            msg = from_bytes(request, limits=self.limits, n_cells=self.n_cells,
                             expect=(PolicyUpdate, RoundRequest, InitialStatesRequest, FedAvgRequest,
                                     CellReleaseRequest))
            if isinstance(msg, PolicyUpdate):
                reply = self._on_policy_update(msg)
            elif isinstance(msg, RoundRequest):
                reply = self._on_round_request(msg)
            elif isinstance(msg, FedAvgRequest):
                reply = self._on_fedavg_request(msg)
            elif isinstance(msg, CellReleaseRequest):
                reply = self._on_cell_release_request(msg)
            else:
                assert isinstance(msg, InitialStatesRequest)        # the only kind ``expect`` leaves
                reply = self._on_initial_states_request(msg)
        except MessageError as err:
            log.info("device %d refused a request: %s (%s)", self.device_id, err, err.code)
            return ErrorReply.from_error(peek_round(request), err, self.limits).to_bytes()
        return reply.to_bytes()

    def _require_session(self) -> TrainingSession:
        if self.bundle is None:
            raise MessageError(NOT_READY, "no model bundle installed")
        if self._session is None:                   # released (release_sessions): reopen from the checkpoint
            self._session = checkpoint.open_checkpoint(self.root, self.bundle, self.device_id)
        return self._session

    def _require_days(self) -> np.ndarray:
        days = self.days()
        if not len(days):
            raise MessageError(NOT_READY, "the device holds no days yet")
        return days

    def _on_policy_update(self, msg: PolicyUpdate) -> Ack:
        self._require_session()
        self._policy_path = policy_update.accept_policy(self.root, msg, self._installed)
        self._policy, self._policy_sha256 = None, msg.policy_sha256      # opened when the app generates
        return Ack(msg.round, KIND_NAMES[KIND_POLICY_UPDATE], 0)

    def _plan(self) -> DeclaredPlan | None:
        """The privacy plan in force: the installed bundle's, or the one remembered from an earlier bundle when
        this one declares none (None: no bundle, and never a private run)."""
        return plan_in_force(self.root, None if self.bundle is None else self.bundle.privacy)

    def forget_privacy_plan(self) -> bool:
        """The owner's explicit choice to leave an earlier run's privacy plan behind (its floors and budget no
        longer apply to bundles that declare none; the ledger is kept). Returns whether one was in force."""
        self._secagg = None
        return forget_plan(self.root)

    def _on_round_request(self, msg: RoundRequest) -> Ack:
        self._require_session()
        check_request_budget(self.root, self._plan(), msg.round, msg.n_queries)
        assert self._bundle_sha256 is not None             # set with the bundle
        session = checkpoint.before_round(self.root, self._require_session(), self._installed, self._bundle_sha256,
                                          msg.round, self.device_id)
        self._session = session
        positives = self.positive_pairs()
        try:
            prob, _ = train_and_score(session, positives, msg, self._environment.cells,
                                      self._installed.manifest["discriminator"]["labels"], self.rng)
            checkpoint.save_checkpoint(self.root, session, self._installed)
        except BaseException:
            # a half-trained discriminator must not survive a failure: back to the checkpoint on disk
            self._session = checkpoint.open_checkpoint(self.root, self._installed, self.device_id)
            raise
        self._pending.set(reward_vector(prob))
        return Ack(msg.round, KIND_NAMES[KIND_ROUND_REQUEST], len(self._pending))

    def _on_fedavg_request(self, msg: FedAvgRequest) -> Ack:
        """DP-FedAvg: local maximum-likelihood epochs from the global parameters, the clipped delta pending."""
        from pategail.sdk.fedavg_round import PolicyTrainer, delta_upload, labelled_days, local_update

        self._require_session()
        days = self._require_days()
        training = self._installed.policy_training
        if training is None:
            raise MessageError(INCOMPATIBLE, "the installed bundle has no policy training artifacts")
        if len(msg.parameters) != training.n_parameters:
            raise MessageError(INCOMPATIBLE, f"{len(msg.parameters)} policy parameters, the bundle's policy has "
                                             f"{training.n_parameters}")
        check_request_budget(self.root, self._plan(), msg.round, len(msg.parameters))
        if self._trainer is None:
            self._trainer = PolicyTrainer(self._installed)
        if self._labelled is None:
            self._labelled = labelled_days(days, self.home, self._environment.cells)
        delta = local_update(self._trainer, self._labelled, msg.parameters, epochs=msg.epochs,
                             batch_size=msg.batch_size, learning_rate=msg.learning_rate, rng=self.rng)
        try:
            upload = delta_upload(delta, msg.clip_norm)
        except ValueError as err:
            raise MessageError(NON_FINITE, str(err)) from None
        self._pending.set(upload)
        return Ack(msg.round, KIND_NAMES[KIND_FEDAVG_REQUEST], len(self._pending))

    def _on_initial_states_request(self, msg: InitialStatesRequest) -> Ack:
        self._require_session()
        days = self._require_days()
        env = self._environment
        contribution = environment_vector(days, self.home, env.cells, env.alpha, env.candidates,
                                          msg.region_cells, env.action_rates, env.initial_states_days_cap)
        check_request_budget(self.root, self._plan(), msg.round, len(contribution), environment=True)
        self._pending.set(contribution, environment=True, env_l1_bound=env_l1_bound(env.action_rates))
        return Ack(msg.round, KIND_NAMES[KIND_INITIAL_STATES_REQUEST], len(self._pending))

    def _on_cell_release_request(self, msg: CellReleaseRequest) -> Ack:
        """A run's cell-table release: the squares of the public map this device visits most, as a 0/1 vector
        (at most ``max_cells`` ones: L2 ≤ √max_cells whatever its days hold), pending for a Gaussian round held
        to the plan's cell-release floor. Only on the public map itself, and only under a plan that declares
        the release (a device never marks its squares for a run that did not plan to add noise to them)."""
        from pategail.sdk.cell_universe import visited_vector

        self._require_session()
        env = self._environment
        if env.universe is not None:
            raise MessageError(INCOMPATIBLE, "the installed bundle is already on a released cell table; a cell "
                                             "release is made on the public map")
        plan = self._plan()
        if plan is None or plan.cells_noise_multiplier <= 0:
            raise MessageError(BUDGET, f"round {msg.round}: the privacy plan in force declares no cell-table "
                                       "release; refused")
        days = self._require_days()
        check_request_budget(self.root, plan, msg.round, len(env.cells), cells=True)
        self._pending.set(visited_vector(days, len(env.cells), msg.max_cells), cells=True)
        return Ack(msg.round, KIND_NAMES[KIND_CELL_RELEASE_REQUEST], len(self._pending))

    # -- secure aggregation ----------------------------------------------------------------------------------
    def secagg_step(self, directory: KeyDirectory, step: str, *frames: bytes) -> bytes:
        """One step of a secure-aggregation round, frames in, reply frame out — the device's only secure-
        aggregation entry point, whatever carries the frames (the emulator's driver, the network client).
        ``step`` is one of :data:`~pategail.sdk.secagg_endpoint.SECAGG_STEPS`; ``directory`` the public-key
        directory the device was enrolled in. The masked upload ("input") carries the pending vector, which
        the caller never supplies or sees, and clears it once made. Raises SecAggError when the device stops
        (a dropout, from the aggregator's view): ProtocolError for a missing pending vector or one of the
        wrong length, the client's own refusals otherwise."""
        if step not in SECAGG_FRAMES:
            raise ProtocolError(f"unknown secure-aggregation step {step!r}")
        if len(frames) != SECAGG_FRAMES[step] or not all(isinstance(f, (bytes, bytearray)) for f in frames):
            raise MessageRejected(f"a {step} order carries {SECAGG_FRAMES[step]} frame(s) of bytes, got "
                                  f"{len(frames)}")
        client = self._secagg_client(directory)
        try:
            if step == "input":
                (share_delivery,) = frames
                scores = self._pending.take()
                try:
                    reply = client.masked_input(share_delivery, scores)
                except ValueError as err:                # wrong length: the client's state is unchanged
                    raise ProtocolError(str(err)) from None
                self._pending.set(None)                  # uploaded once: a second noisy copy would weaken the DP
                return reply
            if step == "advertise":
                signed_config, envelope = frames                 # two: checked above
                return client.start_round(signed_config, envelope, environment=self._pending.environment,
                                          env_l1_bound=self._pending.env_l1_bound, cells=self._pending.cells)
            method = {"share": client.share_keys, "ack": client.consistency_check, "unmask": client.unmask}[step]
            return method(*frames)
        except SecAggError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, struct.error) as err:
            # bytes no honest aggregator sends: a typed refusal, never a crash of the caller's loop
            raise MessageRejected(f"malformed {step} frame ({type(err).__name__}: {err})") from None

    def secagg_endpoint(self, directory: KeyDirectory) -> SecAggEndpoint:
        """The device's side of a secure-aggregation round as an object with the client's five step methods
        (``run_secure_round(endpoints, None, ...)``): an adapter over :meth:`secagg_step`."""
        return SecAggEndpoint(self, directory)

    def _secagg_client(self, directory: KeyDirectory) -> SecAggClient:
        # one client per directory and plan: a client keeps its round state across calls; replayed rounds are
        # refused across restarts too (the round log on disk)
        try:
            plan = self._plan()
        except MessageError as err:                     # an unreadable remembered plan: take part in nothing
            raise RoundRefused(err.code, str(err)) from None
        if self._secagg is None or (self._secagg_directory, self._secagg_plan) != (directory, plan):
            self._secagg = SecAggClient(self.device_id, self.identity, directory,
                                        round_log=RoundLog(self.root / ROUND_LOG_FILE),
                                        policy=None if plan is None else plan.policy(),
                                        ledger=device_ledger(self.root, plan))
            self._secagg_directory, self._secagg_plan = directory, plan
        return self._secagg
