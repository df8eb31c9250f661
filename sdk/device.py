"""The device client: what a phone app embeds (the Android demo mirrors this reference implementation).

A :class:`Device` owns one directory — the app's private storage; in the emulator, one directory per
device — and everything in it:

- ``days.npy``               the owner's days (:class:`~pategail.sdk.store.TrajectoryStore`); never sent;
- ``bundle/``                the verified model bundle (copied in by :meth:`Device.install_bundle`);
- ``discriminator.ckpt``     the personal discriminator D_u (ONNX Runtime checkpoint, optimizer state included),
  ``discriminator.ckpt.bundle`` the SHA-256 of the bundle it belongs to;
- ``policy.onnx``, ``policy.json``  the latest policy accepted from the coordinator (hash-checked);
- ``identity.key``           the secure-aggregation identity (Ed25519 + X25519 private keys, mode 0600);
- ``secagg-rounds.json``     the last secure-aggregation round accepted per coordinator key (replay guard);
- ``privacy-ledger.json``    the releases the device took part in, against the bundle's declared budget.

The coordinator reaches the device only through :meth:`Device.handle` (bytes in, bytes out; see
:mod:`pategail.sdk.messages`) and, for the secure aggregation that follows, through the endpoint of
:meth:`Device.secagg_endpoint`, whose masked upload carries the device's pending vector — the clipped scores
D_u(s, a) of the last RoundRequest, or its initial-state contribution. The caller never supplies (or sees)
that vector. A refused request changes nothing: checkpoint, pending vector and policy stay as they were.

One round of the paper's Algorithm 1 on the device (RoundRequest): k AdamW steps on minibatches of
``batch_size`` pairs — half the owner's real pairs (``pair_features`` of its days with ``label_actions``,
label expert), half the generated pairs of the request (label generated) — then D_u(s, a) of every generated
pair, clipped to [0, 1]. Torch-free: numpy, onnxruntime (training build) and cryptography only.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from pategail.errors import PategailError
from pategail.sdk.accounting import QueryRelease
from pategail.sdk.bundle import (MANIFEST, Bundle, BundleError, TrainingSession, ensure_training_api,
                                 load_bundle, open_generation_session, open_policy_session, open_training_session,
                                 session_options, sha256_file)
from pategail.sdk.epr import CellGeometry, explore_law_contribution
from pategail.sdk.features import N_PAIR_FEATURES, action_mask, label_actions, pair_features
from pategail.sdk.generate import (POLICY_INPUT_CELLS, POLICY_INPUT_FEATURES, POLICY_INPUT_MASK,
                                   POLICY_OUTPUT_LOG_PROBS, GeneratedDays, generate_days, prefix_features)
from pategail.sdk.messages import (BUDGET, DEFAULT_LIMITS, HASH, INCOMPATIBLE, KIND_INITIAL_STATES_REQUEST,
                                   KIND_NAMES, KIND_POLICY_UPDATE, KIND_ROUND_REQUEST, NON_FINITE, NOT_READY,
                                   Ack, ErrorReply, InitialStatesRequest, MessageError, MessageLimits,
                                   PolicyUpdate, RoundRequest, from_bytes, peek_round, sha256_hex)
from pategail.sdk.secagg.client import SecAggClient
from pategail.sdk.secagg.config import DevicePublicKeys, KeyDirectory
from pategail.sdk.secagg.crypto import DeviceIdentity
from pategail.sdk.secagg.errors import ProtocolError, RoundRefused
from pategail.sdk.secagg.ledger import PrivacyLedger
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.sdk.places import place_contribution
from pategail.sdk.secagg.replay import RoundLog
from pategail.sdk.store import DAYS_CAP, TrajectoryStore, initial_state_contribution

log = logging.getLogger(__name__)

BUNDLE_DIR = "bundle"
CHECKPOINT = "discriminator.ckpt"
CHECKPOINT_TAG = "discriminator.ckpt.bundle"
BEFORE_ROUND = "discriminator.before-round.ckpt"
"""The checkpoint as it was before the last round request, and (in ``ROUND_TAG``) that round's number: a
coordinator that crashed mid-round sends the same round again, and the device replays it from here instead
of training twice — so a resumed run ends exactly where an uninterrupted one would."""
ROUND_TAG = "discriminator.round"
POLICY_FILE = "policy.onnx"
POLICY_META = "policy.json"
IDENTITY_FILE = "identity.key"
ROUND_LOG_FILE = "secagg-rounds.json"
"""Last secure-aggregation round accepted per coordinator key: a restarted app must not reopen old rounds."""
LEDGER_FILE = "privacy-ledger.json"
"""The releases this device took part in (sdk/secagg/ledger.py), budgeted by the bundle's declared plan."""


class DeviceError(PategailError):
    """The device cannot do what was asked (no bundle, no days, an unreadable identity file)."""


def _write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to a temporary sibling, fsync, and rename over ``path``: never half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, mode)                      # the umask may have narrowed or the file may have existed
    os.replace(tmp, path)


def load_or_create_identity(path: Path) -> DeviceIdentity:
    """The device's long-term secure-aggregation keys, made at first start and kept (mode 0600) in ``path``:
    32 raw Ed25519 private bytes then 32 raw X25519 private bytes."""
    if path.is_file():
        raw = path.read_bytes()
        if len(raw) != 64:
            raise DeviceError(f"{path}: not an identity file (expected 64 bytes); delete it to enrol again")
        return DeviceIdentity(Ed25519PrivateKey.from_private_bytes(raw[:32]),
                              X25519PrivateKey.from_private_bytes(raw[32:]))
    identity = DeviceIdentity.generate()
    raw = serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    _write_atomic(path, identity.signing_key.private_bytes(*raw) + identity.envelope_key.private_bytes(*raw), 0o600)
    return identity


class Device:
    """One device: its trajectory store, model bundle, personal discriminator, policy and secure-aggregation
    identity, all under ``root`` (see the module docstring). ``rng`` drives minibatch sampling; ``limits``
    bound the requests it accepts. A device restarted on the same ``root`` resumes where it was (bundle,
    discriminator checkpoint, accepted policy, identity); a pending vector does not survive a restart."""

    def __init__(self, root: str | os.PathLike, device_id: int, *, rng: np.random.Generator,
                 limits: MessageLimits = DEFAULT_LIMITS):
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
        self._policy = None
        self._policy_sha256: str | None = None
        self._step_session = None
        self._pending: np.ndarray | None = None
        self._positives: np.ndarray | None = None
        self._geometry: CellGeometry | None = None
        self._secagg: SecAggClient | None = None
        self._secagg_directory: KeyDirectory | None = None
        self._secagg_plan: DeclaredPlan | None = None
        if (self.root / BUNDLE_DIR / MANIFEST).is_file():
            try:
                self._open_installed()
            except BundleError as err:
                log.warning("device %d: the installed bundle is unusable (%s); install one again",
                            self.device_id, err)
                self.bundle = self._session = self._policy = None

    # -- local API (the app) ---------------------------------------------------------------------------------
    def add_days(self, days) -> int:
        """Store more of the owner's days (int (n, 48); cell ids checked against the bundle's cell table once
        one is installed). Returns the number of days stored."""
        n = self.store.add_days(days)
        self._positives = None
        return n

    @property
    def n_cells(self) -> int | None:
        return None if self.bundle is None else len(self.bundle.environment.cells)

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
        return None if self._pending is None else self._pending.copy()

    @property
    def secagg(self) -> SecAggClient | None:
        """The secure-aggregation client (created by :meth:`secagg_endpoint`)."""
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
        if self._policy is None:
            raise DeviceError("no model bundle installed")
        days = self.store.days()
        if not len(days):
            raise DeviceError("the device holds no days to take initial states from")
        env = self.bundle.environment
        if self._geometry is None:
            self._geometry = CellGeometry.build(env.cells, env.candidates)
        first = rng.choice(days[:, 0], size=int(n_days))
        homes = np.full(int(n_days), self.store.home, dtype=np.int32)
        return generate_days(self._generation_session(), self._geometry, homes, first, rng, alpha=env.alpha,
                             explore_factors=env.explore_factors, places=env.places)

    def _generation_session(self):
        """The bundle's incremental policy model while the policy in use is the bundle's (it computes that
        policy only); the policy in use (full prefix) after a PolicyUpdate or with an older bundle."""
        bundle_policy = self.bundle.manifest["files"][self.bundle.policy.path.name]["sha256"]
        if self.bundle.policy_step is None or self._policy_sha256 != bundle_policy:
            return self._policy
        if self._step_session is None:
            self._step_session = open_generation_session(self.bundle)
        return self._step_session

    # -- bundle and checkpoint -------------------------------------------------------------------------------
    def install_bundle(self, bundle_dir: str | os.PathLike, expected_sha256: str | None = None) -> Bundle:
        """Verify the bundle at ``bundle_dir`` (hashes, versions, runtime; ``expected_sha256`` if given),
        copy it into the device directory and open it. The discriminator checkpoint is kept if it belongs to
        this very bundle; otherwise (another bundle, or unreadable) the device starts again from the bundle's
        checkpoint and logs a warning. Raises BundleError (nothing changed) when the bundle is refused."""
        bundle = load_bundle(bundle_dir)
        if expected_sha256 is not None and bundle.sha256 != expected_sha256:
            raise BundleError(f"{bundle_dir}: bundle SHA-256 {bundle.sha256} differs from the expected "
                              f"{expected_sha256}")
        if bundle.environment is None:
            raise BundleError(f"{bundle_dir}: a models-only bundle (no cell table); devices cannot run it")
        if self.store.max_cell() >= len(bundle.environment.cells):
            raise BundleError(f"{bundle_dir}: the bundle has {len(bundle.environment.cells)} cells, fewer than "
                              "the cell ids of the stored days")
        target = self.root / BUNDLE_DIR
        if Path(bundle_dir).resolve() != target.resolve():
            tmp, old = self.root / f".{BUNDLE_DIR}.tmp", self.root / f".{BUNDLE_DIR}.old"
            for p in (tmp, old):
                shutil.rmtree(p, ignore_errors=True)
            shutil.copytree(bundle.root, tmp)
            load_bundle(tmp)                        # the copy is what the device will run: check it too
            if target.exists():
                target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        self._open_installed()
        return self.bundle

    def _open_installed(self) -> None:
        bundle = load_bundle(self.root / BUNDLE_DIR)
        if bundle.environment is None:
            raise BundleError(f"{bundle.root}: a models-only bundle (no cell table)")
        sha = bundle.sha256
        # compare with the hash remembered at the last opening: Bundle.sha256 re-reads the (replaced) manifest
        changed = sha != self._bundle_sha256
        self.bundle, self._bundle_sha256 = bundle, sha
        self.store.n_cells = len(bundle.environment.cells)
        self._session = self._open_checkpoint(bundle)
        self._open_policy(bundle)
        if changed:
            self._pending = self._positives = self._geometry = None

    def _open_checkpoint(self, bundle: Bundle) -> TrainingSession:
        """The device's own checkpoint if it is this bundle's and readable; else the bundle's (saying why)."""
        ckpt, tag = self.root / CHECKPOINT, self.root / CHECKPOINT_TAG
        session, reason = None, None
        if ckpt.exists():
            owner = tag.read_text(encoding="ascii", errors="replace").strip() if tag.is_file() else ""
            if owner != bundle.sha256:
                reason = "mismatched (it belongs to another bundle)"
            else:
                try:
                    session = open_training_session(bundle, ckpt)
                    flat = session.get_flat_parameters()
                    if flat.shape != (bundle.n_parameters,) or not np.isfinite(flat).all():
                        session, reason = None, (f"corrupt ({flat.size} parameters, expected "
                                                 f"{bundle.n_parameters}, or non-finite values)")
                except Exception as err:            # noqa: BLE001 — whatever ORT raises, the file is unusable
                    session, reason = None, f"corrupt ({type(err).__name__})"
        if reason is not None:
            log.warning("device %d: checkpoint %s %s; starting again from the bundle", self.device_id, ckpt,
                        reason)
        if session is None:
            session = open_training_session(bundle)
            self._save_checkpoint(session, bundle)
        return session

    def _save_checkpoint(self, session: TrainingSession, bundle: Bundle) -> None:
        # checkpoint first, then its tag: a crash in between leaves a tag of the old bundle, so the next start
        # discards the new checkpoint (safe) rather than trusting a stale one
        ckpt = self.root / CHECKPOINT
        tmp = ckpt.with_name(f".{CHECKPOINT}.tmp")
        session.save_checkpoint(tmp)
        os.replace(tmp, ckpt)
        _write_atomic(self.root / CHECKPOINT_TAG, (bundle.sha256 + "\n").encode("ascii"))

    def _restore_session(self) -> None:
        """Back to the checkpoint on disk (after a failure half-way through a round)."""
        self._session = self._open_checkpoint(self.bundle)

    # -- policy ----------------------------------------------------------------------------------------------
    def _open_policy(self, bundle: Bundle) -> None:
        self._step_session = None                   # belongs to the bundle being replaced
        path, meta = self.root / POLICY_FILE, self.root / POLICY_META
        if path.is_file() and meta.is_file():
            try:
                info = json.loads(meta.read_text(encoding="utf-8"))
                if info["bundle_sha256"] != bundle.sha256:          # a new bundle brings its own policy
                    info = None
                ok = info is not None and sha256_file(path) == info["sha256"]
            except (ValueError, KeyError, TypeError):
                info, ok = {}, False
            if ok:
                try:
                    self._policy = self._policy_session(path.read_bytes(), bundle)
                    self._policy_sha256 = info["sha256"]
                    return
                except MessageError:
                    pass
            if info is not None:
                log.warning("device %d: the accepted policy %s is corrupt; using the bundle's policy",
                            self.device_id, path)
        for p in (path, meta):
            p.unlink(missing_ok=True)
        self._policy = open_policy_session(bundle)
        self._policy_sha256 = bundle.manifest["files"][bundle.policy.path.name]["sha256"]

    @staticmethod
    def _policy_session(model: bytes, bundle: Bundle):
        """An InferenceSession on ``model``, checked against the bundle's policy interface and probed once:
        every cell id and every slot position must give finite log-probabilities."""
        import onnxruntime as ort

        try:
            session = ort.InferenceSession(model, session_options(1), providers=["CPUExecutionProvider"])
        except Exception as err:                     # noqa: BLE001 — ORT raises several types for a bad model
            raise MessageError(INCOMPATIBLE, f"not a loadable ONNX model ({type(err).__name__})") from None
        names = ({i.name for i in session.get_inputs()}, {o.name for o in session.get_outputs()})
        if names != (set(bundle.policy.input_names), set(bundle.policy.output_names)):
            raise MessageError(INCOMPATIBLE, "the model's inputs/outputs are not the bundle's policy interface")
        cells = bundle.environment.cells
        n, slots = len(cells), int(bundle.manifest["features"]["slots"])
        probe = np.resize(np.arange(n, dtype=np.int32), (-(-n // slots), slots))
        homes = probe[:, 0]
        try:
            (log_probs,) = session.run([POLICY_OUTPUT_LOG_PROBS], {
                POLICY_INPUT_CELLS: probe.astype(np.int64), POLICY_INPUT_FEATURES: prefix_features(probe, homes, cells),
                POLICY_INPUT_MASK: action_mask(probe, homes)})
        except Exception as err:                     # noqa: BLE001
            raise MessageError(INCOMPATIBLE, f"the model does not run on policy inputs ({type(err).__name__})") \
                from None
        if log_probs.shape != probe.shape + (4,):
            raise MessageError(INCOMPATIBLE, f"log_probs of shape {log_probs.shape}, expected {probe.shape + (4,)}")
        if not np.isfinite(log_probs).all():
            raise MessageError(NON_FINITE, "the policy gives NaN or Inf log-probabilities")
        return session

    # -- protocol --------------------------------------------------------------------------------------------
    def handle(self, request: bytes) -> bytes:
        """The only entry point for coordinator messages: decode and validate ``request`` and carry it out.
        Returns the reply's bytes — an Ack, or an ErrorReply when the request is refused, in which case the
        device's state (checkpoint, pending vector, policy) is exactly as before."""
        try:
            msg = from_bytes(request, limits=self.limits, n_cells=self.n_cells,
                             expect=(PolicyUpdate, RoundRequest, InitialStatesRequest))
            if isinstance(msg, PolicyUpdate):
                reply = self._on_policy_update(msg)
            elif isinstance(msg, RoundRequest):
                reply = self._on_round_request(msg)
            else:
                reply = self._on_initial_states_request(msg)
        except MessageError as err:
            log.info("device %d refused a request: %s (%s)", self.device_id, err, err.code)
            return ErrorReply.from_error(peek_round(request), err, self.limits).to_bytes()
        return reply.to_bytes()

    def _require_session(self) -> TrainingSession:
        if self._session is None:
            raise MessageError(NOT_READY, "no model bundle installed")
        return self._session

    def _require_days(self) -> np.ndarray:
        days = self.store.days()
        if not len(days):
            raise MessageError(NOT_READY, "the device holds no days yet")
        return days

    def _on_policy_update(self, msg: PolicyUpdate) -> Ack:
        self._require_session()
        if sha256_hex(msg.policy_onnx) != msg.policy_sha256:
            raise MessageError(HASH, "the policy's SHA-256 differs from the announced one")
        session = self._policy_session(msg.policy_onnx, self.bundle)
        _write_atomic(self.root / POLICY_FILE, msg.policy_onnx)
        meta = {"sha256": msg.policy_sha256, "round": msg.round, "bundle_sha256": self.bundle.sha256}
        _write_atomic(self.root / POLICY_META, json.dumps(meta).encode("utf-8"))
        self._policy, self._policy_sha256 = session, msg.policy_sha256
        return Ack(msg.round, KIND_NAMES[KIND_POLICY_UPDATE], 0)

    def positive_pairs(self) -> np.ndarray:
        """float32 (n_days · 47, 15): the owner's real (state, action) pairs (cached until days are added)."""
        if self._positives is None:
            days = self._require_days()
            homes = np.full(len(days), self.store.home, dtype=np.int32)
            pairs = pair_features(days, homes, label_actions(days, homes), self.bundle.environment.cells)
            self._positives = pairs.reshape(-1, N_PAIR_FEATURES)
        return self._positives

    def _on_round_request(self, msg: RoundRequest) -> Ack:
        session = self._require_session()
        self._check_budget(msg.round, msg.n_queries)
        before, tag = self.root / BEFORE_ROUND, self.root / ROUND_TAG
        # the tag names the bundle too: a round number of another run or bundle never rewinds this one
        mark = f"{self._bundle_sha256} {msg.round}"
        if tag.is_file() and tag.read_text().strip() == mark and before.is_file():
            log.info("device %d: round %d again (the coordinator restarted); replaying it from the checkpoint "
                     "taken before it", self.device_id, msg.round)
            session = self._session = open_training_session(self.bundle, before)
        else:
            tmp = before.with_name(f".{BEFORE_ROUND}.tmp")
            session.save_checkpoint(tmp)
            os.replace(tmp, before)
            _write_atomic(tag, f"{mark}\n".encode("ascii"))
        positives = self.positive_pairs()
        cells = self.bundle.environment.cells
        negatives = pair_features(msg.days, msg.homes, msg.actions, cells).reshape(-1, N_PAIR_FEATURES)
        labels = self.bundle.manifest["discriminator"]["labels"]
        n_pos = msg.batch_size // 2
        n_neg = msg.batch_size - n_pos
        batch_labels = np.concatenate([np.full(n_pos, labels["expert"], dtype=np.float32),
                                       np.full(n_neg, labels["generated"], dtype=np.float32)])
        try:
            for _ in range(msg.k_steps):
                i = self.rng.integers(0, len(positives), n_pos)
                j = self.rng.integers(0, len(negatives), n_neg)
                session.train_step(np.concatenate([positives[i], negatives[j]]), batch_labels)
            _, prob = session.score(negatives)
            if not np.isfinite(prob).all():
                raise MessageError(NON_FINITE, "the discriminator produced non-finite scores; state restored")
            self._save_checkpoint(session, self.bundle)
        except BaseException:
            self._restore_session()                 # a half-trained discriminator must not survive a failure
            raise
        self._pending = np.clip(prob.astype(np.float64), 0.0, 1.0)
        return Ack(msg.round, KIND_NAMES[KIND_ROUND_REQUEST], len(self._pending))

    def _on_initial_states_request(self, msg: InitialStatesRequest) -> Ack:
        self._require_session()
        days = self._require_days()
        env = self.bundle.environment
        contribution = np.concatenate([
            initial_state_contribution(days, self.store.home, self.n_cells),
            explore_law_contribution(days, self.store.home, env.cells, alpha=env.alpha, candidates=env.candidates),
            place_contribution(days, self.store.home, self.n_cells, DAYS_CAP)])
        self._check_budget(msg.round, len(contribution))
        self._pending = contribution
        return Ack(msg.round, KIND_NAMES[KIND_INITIAL_STATES_REQUEST], len(self._pending))

    def _ledger(self) -> PrivacyLedger:
        """The device's own privacy ledger, budgeted by the installed bundle's declared plan (if any)."""
        plan = self.bundle.privacy if self.bundle is not None else None
        return PrivacyLedger(self.root / LEDGER_FILE, None if plan is None else plan.target_epsilon,
                             1e-5 if plan is None else plan.target_delta)

    def _check_budget(self, round_: int, n_queries: int) -> None:
        """Refuse (ErrorReply ``budget``, nothing changed) a request whose release, at the declared plan's
        noise, would take this device past its own budget; the secure round checks the signed scales again."""
        plan = self.bundle.privacy
        if plan is None:
            return
        try:
            after = self._ledger().epsilon(QueryRelease(plan.sum_noise_scale, plan.sq_sum_noise_scale, n_queries))
        except RoundRefused as err:             # an unreadable ledger: refusing is the safe answer
            raise MessageError(BUDGET, str(err)) from None
        if after > plan.target_epsilon:
            raise MessageError(BUDGET, f"round {round_}: answering would take this device to ε = {after:.4g}, past "
                                       f"its budget {plan.target_epsilon:g}; refused")

    # -- secure aggregation ----------------------------------------------------------------------------------
    def secagg_endpoint(self, directory: KeyDirectory) -> "SecAggEndpoint":
        """The device's side of a secure-aggregation round (``run_secure_round(endpoints, None, ...)``), with
        ``directory`` the public-key directory it was enrolled in. Its masked upload is the pending vector."""
        # one client per directory: a client keeps its round state (and refuses replayed rounds) across calls
        plan = self.bundle.privacy if self.bundle is not None else None
        if self._secagg is None or (self._secagg_directory, self._secagg_plan) != (directory, plan):
            self._secagg = SecAggClient(self.device_id, self.identity, directory,
                                        round_log=RoundLog(self.root / ROUND_LOG_FILE),
                                        policy=None if plan is None else plan.policy(), ledger=self._ledger())
            self._secagg_directory, self._secagg_plan = directory, plan
        return SecAggEndpoint(self)


class SecAggEndpoint:
    """:class:`~pategail.sdk.secagg.SecAggClient`'s five steps for one device, where ``masked_input`` takes no
    scores: it uploads the device's pending vector (and clears it once the upload is made). A device without
    a pending vector, or one whose length is not the round's, raises ProtocolError (a dropout)."""

    def __init__(self, device: Device):
        self._device = device
        self._client = device.secagg

    @property
    def device_id(self) -> int:
        return self._device.device_id

    def start_round(self, config: bytes, envelope: bytes) -> bytes:
        return self._client.start_round(config, envelope)

    def share_keys(self, key_broadcast: bytes) -> bytes:
        return self._client.share_keys(key_broadcast)

    def masked_input(self, share_delivery: bytes) -> bytes:
        scores = self._device._pending
        if scores is None:
            raise ProtocolError("no pending vector: the device answered no RoundRequest or "
                                "InitialStatesRequest since its last upload")
        try:
            reply = self._client.masked_input(share_delivery, scores)
        except ValueError as err:                    # wrong length: the client's state is unchanged
            raise ProtocolError(str(err)) from None
        self._device._pending = None                 # uploaded once: a second noisy copy would weaken the DP
        return reply

    def consistency_check(self, survivor_set: bytes) -> bytes:
        return self._client.consistency_check(survivor_set)

    def unmask(self, ack_set: bytes) -> bytes:
        return self._client.unmask(ack_set)
