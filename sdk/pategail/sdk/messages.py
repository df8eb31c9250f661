"""The device protocol: typed, versioned messages between the coordinator and a device, and their bytes.

Coordinator → device: :class:`PolicyUpdate`, :class:`RoundRequest`, :class:`InitialStatesRequest`,
:class:`FedAvgRequest` (a DP-FedAvg run's round), :class:`CellReleaseRequest` (a run's privately released cell
table).
Device → coordinator: :class:`Ack`, :class:`ErrorReply`. (Scores and initial-state contributions never
travel in these messages: they go only into the masked secure-aggregation upload, ``pategail.sdk.secagg``.)

Frame (the same bytes would cross a network)::

    MAGIC "PGDV" | version u8 | kind u8 | body length u32 | body

Bodies are written with the secure-aggregation wire helpers (:mod:`pategail.sdk.secagg.wire`): big-endian
integers, length-prefixed blobs; arrays are little-endian with their shape in front. Decoding is strict: an
unknown magic, version or kind, a truncated body, trailing bytes, a wrong shape, an out-of-range value or a
field over the :class:`MessageLimits` raises :class:`MessageError` with a ``code`` the device puts in its
:class:`ErrorReply`. Every dataclass validates itself on construction too, so the coordinator cannot build
a message the device would refuse for its form.
"""
from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, NoReturn, TypeVar, Union, cast

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from pategail.sdk.contribution import reward_count
from pategail.sdk.errors import SdkError
from pategail.sdk.features import N_ACTIONS, SLOTS
from pategail.sdk.secagg.errors import MessageRejected
from pategail.sdk.secagg.wire import Reader, Writer

MAGIC = b"PGDV"
PROTOCOL_VERSION = 1
"""Version of the device protocol this SDK speaks; a frame of another version is refused."""
_HEAD = struct.Struct(">4sBBI")

KIND_POLICY_UPDATE, KIND_ROUND_REQUEST, KIND_INITIAL_STATES_REQUEST, KIND_ACK, KIND_ERROR = 1, 2, 3, 4, 5
KIND_FEDAVG_REQUEST = 6
KIND_CELL_RELEASE_REQUEST = 7
KIND_NAMES = {KIND_POLICY_UPDATE: "policy_update", KIND_ROUND_REQUEST: "round_request",
              KIND_INITIAL_STATES_REQUEST: "initial_states_request", KIND_ACK: "ack", KIND_ERROR: "error",
              KIND_FEDAVG_REQUEST: "fedavg_request", KIND_CELL_RELEASE_REQUEST: "cell_release_request"}
"""Wire code → name; an :class:`Ack`'s ``kind`` is the name of the request it acknowledges."""
_KIND_CODES = {v: k for k, v in KIND_NAMES.items()}
NO_ROUND = -1
"""``ErrorReply.round`` when the request was too malformed to read its round."""

# ErrorReply codes
MALFORMED = "malformed"            # not a frame, truncated, trailing bytes, unknown kind, bad field
VERSION = "version"                # a protocol version this SDK does not speak
SHAPE = "shape"                    # an array of the wrong shape or type
NON_FINITE = "non_finite"          # NaN or Inf where numbers are expected (also: a policy that outputs them)
TOO_LARGE = "too_large"            # over a MessageLimits bound
CELL_RANGE = "cell_range"          # a cell id outside the device's cell table
HASH = "hash"                      # a policy whose SHA-256 differs from the one announced
INCOMPATIBLE = "incompatible"      # a policy model that is not the bundle's policy interface
NOT_READY = "not_ready"            # no bundle installed, or no days stored yet
BUDGET = "budget"                  # answering would take the device past its own privacy budget
ERROR_CODES = (MALFORMED, VERSION, SHAPE, NON_FINITE, TOO_LARGE, CELL_RANGE, HASH, INCOMPATIBLE, NOT_READY, BUDGET)


class MessageError(SdkError):
    """A message was refused; ``code`` is one of :data:`ERROR_CODES`. The receiver's state is unchanged."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class MessageLimits:
    """Bounds a device enforces on what it receives (a request over them is refused, ``too_large``)."""

    max_days: int = 4096
    """Generated days per RoundRequest: 4,096 days = 192,512 pairs, about 1 MB on the wire."""
    max_k_steps: int = 10_000
    """Discriminator training steps per round (the paper uses a few; 10,000 is ~1.5 s on one core)."""
    max_batch_size: int = 4096
    """Pairs per training step (half real, half generated)."""
    max_policy_bytes: int = 64 << 20
    """Size of a policy ONNX model (the default policy is under 1 MB at 4,210 cells)."""
    max_text: int = 1024
    """Characters of an ErrorReply's message."""
    max_round: int = (1 << 63) - 1
    """Largest round number (fits an int64)."""


DEFAULT_LIMITS = MessageLimits()


def _fail(code: str, message: str) -> NoReturn:
    raise MessageError(code, message)


def _check_round(round_: int, limits: MessageLimits, allow_none: bool = False) -> None:
    if isinstance(round_, bool) or not isinstance(round_, (int, np.integer)):
        _fail(MALFORMED, f"round must be an integer, got {type(round_).__name__}")
    lo = NO_ROUND if allow_none else 0
    if not lo <= round_ <= limits.max_round:
        _fail(MALFORMED, f"round {round_} out of range")


def _int_array(value: ArrayLike, dtype: DTypeLike, shape: tuple[int | None, ...], name: str, lo: int,
               hi: int | None) -> np.ndarray:
    """``value`` as a read-only ``dtype`` array of ``shape`` (None = any length) with entries in [lo, hi)."""
    arr = np.asarray(value)
    if arr.ndim != len(shape) or any(s is not None and s != d for s, d in zip(shape, arr.shape)):
        want = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ")"
        _fail(SHAPE, f"{name}: expected shape {want}, got {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
            _fail(NON_FINITE, f"{name}: NaN or Inf")
        _fail(SHAPE, f"{name}: expected integers, got {arr.dtype}")
    if arr.size and (arr.min() < lo or (hi is not None and arr.max() >= hi)):
        _fail(CELL_RANGE if name in ("days", "homes") else MALFORMED,
              f"{name}: values must be in [{lo}, {hi if hi is not None else 'inf'})")
    out = np.ascontiguousarray(arr, dtype=dtype)
    out.flags.writeable = False
    return out


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------- messages
class _Wire:
    """``to_bytes()`` / ``from_bytes()`` of every message type."""

    KIND: ClassVar[int]
    validate: Callable[..., None]
    """``validate(limits)`` (``validate(limits, n_cells)`` of a RoundRequest): raise MessageError when invalid."""
    body: Callable[[], bytes]

    def to_bytes(self) -> bytes:
        """The frame of this message."""
        return to_bytes(cast("Message", self))

    @classmethod
    def from_bytes(cls, data: bytes, *, limits: "MessageLimits | None" = None,
                   n_cells: int | None = None) -> "Message":
        """Decode a frame that must hold a message of this type (see :func:`from_bytes`)."""
        return from_bytes(data, limits=limits or DEFAULT_LIMITS, n_cells=n_cells, expect=cls)


@dataclass(frozen=True)
class PolicyUpdate(_Wire):
    """Coordinator → device: a new policy inference model, used for every generation from now on.

    The device checks ``sha256(policy_onnx) == policy_sha256`` (else ``hash``) and that the model has the
    bundle's policy interface and gives finite log-probabilities (else ``incompatible`` / ``non_finite``).
    """

    round: int
    policy_sha256: str
    """64 lowercase hex digits."""
    policy_onnx: bytes
    KIND: ClassVar[int] = KIND_POLICY_UPDATE

    def __post_init__(self) -> None:
        self.validate(DEFAULT_LIMITS)

    def validate(self, limits: MessageLimits) -> None:
        _check_round(self.round, limits)
        h = self.policy_sha256
        if not isinstance(h, str) or len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
            _fail(MALFORMED, "policy_sha256 must be 64 lowercase hex digits")
        if not isinstance(self.policy_onnx, (bytes, bytearray)) or not self.policy_onnx:
            _fail(MALFORMED, "policy_onnx must be non-empty bytes")
        if len(self.policy_onnx) > limits.max_policy_bytes:
            _fail(TOO_LARGE, f"policy of {len(self.policy_onnx)} bytes, above {limits.max_policy_bytes}")

    def body(self) -> bytes:
        return Writer().raw(_i64(self.round)).raw(self.policy_sha256.encode("ascii")).blob(self.policy_onnx).bytes()

    @classmethod
    def read(cls, r: Reader, limits: MessageLimits) -> "PolicyUpdate":
        round_ = _read_i64(r)
        hex_digits = r.raw(64)
        try:
            digest = hex_digits.decode("ascii")
        except UnicodeDecodeError:
            _fail(MALFORMED, "policy_sha256 is not ASCII")
        n = r.u32()
        if n > limits.max_policy_bytes:
            _fail(TOO_LARGE, f"policy of {n} bytes, above {limits.max_policy_bytes}")
        return _build(cls, limits, round=round_, policy_sha256=digest, policy_onnx=r.raw(n))

    @classmethod
    def for_model(cls, round_: int, policy_onnx: bytes) -> "PolicyUpdate":
        """The update for a serialised policy model, its hash computed here."""
        return cls(round_, sha256_hex(policy_onnx), bytes(policy_onnx))


@dataclass(frozen=True, eq=False)
class RoundRequest(_Wire):
    """Coordinator → device: the generated days of one round of Algorithm 1.

    The device trains its discriminator for ``k_steps`` steps of ``batch_size`` pairs (half its own real
    pairs, half these generated pairs), then scores all n × 47 generated pairs and keeps D_u(s, a), clipped
    to [0, 1], as its pending vector for the secure aggregation that follows. Query j = day j // 47, slot
    j % 47 (row-major order of ``pair_features``).

    days: int32 (n, 48) cell ids; homes: int32 (n,) home cell of each generated day; actions: int8 (n, 47),
    the action taken at slots 0..46 (0 stay, 1 home, 2 return, 3 explore).
    """

    round: int
    k_steps: int
    batch_size: int
    days: np.ndarray
    homes: np.ndarray
    actions: np.ndarray
    KIND: ClassVar[int] = KIND_ROUND_REQUEST

    def __post_init__(self) -> None:
        self.validate(DEFAULT_LIMITS, None)

    def validate(self, limits: MessageLimits, n_cells: int | None) -> None:
        _check_round(self.round, limits)
        for name, v, lo, hi in (("k_steps", self.k_steps, 0, limits.max_k_steps),
                                ("batch_size", self.batch_size, 2, limits.max_batch_size)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                _fail(MALFORMED, f"{name} must be an integer")
            if v > hi:
                _fail(TOO_LARGE, f"{name} = {v}, above the limit {hi}")
            if v < lo:
                _fail(MALFORMED, f"{name} = {v}, below {lo}")
        days = _int_array(self.days, np.int32, (None, SLOTS), "days", 0, n_cells)
        n = len(days)
        if n == 0:
            _fail(SHAPE, "days: a round needs at least one generated day")
        if n > limits.max_days:
            _fail(TOO_LARGE, f"{n} days, above the limit {limits.max_days}")
        object.__setattr__(self, "days", days)
        object.__setattr__(self, "homes", _int_array(self.homes, np.int32, (n,), "homes", 0, n_cells))
        object.__setattr__(self, "actions", _int_array(self.actions, np.int8, (n, SLOTS - 1), "actions", 0,
                                                       N_ACTIONS))

    @property
    def n_queries(self) -> int:
        """Pairs the device scores: n × 47 (the reward vector's length, pategail.sdk.contribution)."""
        return reward_count(self.days.shape[0])

    def body(self) -> bytes:
        w = Writer().raw(_i64(self.round)).u32(self.k_steps).u32(self.batch_size).u32(len(self.days))
        return w.raw(self.days.astype("<i4").tobytes()).raw(self.homes.astype("<i4").tobytes()) \
            .raw(self.actions.astype("i1").tobytes()).bytes()

    @classmethod
    def read(cls, r: Reader, limits: MessageLimits, n_cells: int | None = None) -> "RoundRequest":
        round_, k, b, n = _read_i64(r), r.u32(), r.u32(), r.u32()
        if n > limits.max_days:          # before reading: never allocate what the limits forbid
            _fail(TOO_LARGE, f"{n} days, above the limit {limits.max_days}")
        days = np.frombuffer(r.raw(4 * n * SLOTS), dtype="<i4").reshape(n, SLOTS)
        homes = np.frombuffer(r.raw(4 * n), dtype="<i4")
        actions = np.frombuffer(r.raw(n * (SLOTS - 1)), dtype="i1").reshape(n, SLOTS - 1)
        return _build(cls, limits, n_cells, round=round_, k_steps=k, batch_size=b, days=days, homes=homes,
                      actions=actions)


@dataclass(frozen=True)
class InitialStatesRequest(_Wire):
    """Coordinator → device: make the device's environment contribution its pending vector for the next
    secure round — the initial-state contribution (float (2·n_cells + 2,),
    :func:`pategail.sdk.contribution.initial_state_contribution`), the explore-law contribution
    (float (2·B,), :func:`pategail.sdk.epr.explore_law_contribution`) and the place contribution
    (float (n_cells + 3,), :func:`pategail.sdk.places.place_contribution`); the layout is
    :class:`pategail.sdk.contribution.EnvironmentLayout` with ``place_law=True`` — followed, when
    ``region_cells`` > 0 (Gaussian runs), by the coarse parts over the cell table's regions of at most that
    many cells (:mod:`pategail.sdk.regions`)."""

    round: int
    region_cells: int = 0
    """0: no coarse parts (the body is the round alone, as before); else a 4-byte trailer carries it."""
    KIND: ClassVar[int] = KIND_INITIAL_STATES_REQUEST

    def __post_init__(self) -> None:
        self.validate(DEFAULT_LIMITS)

    def validate(self, limits: MessageLimits) -> None:
        _check_round(self.round, limits)
        if isinstance(self.region_cells, bool) or not isinstance(self.region_cells, (int, np.integer)) \
                or not 0 <= self.region_cells < 1 << 31:
            _fail(MALFORMED, f"region_cells {self.region_cells!r} is not a count of cells")

    def body(self) -> bytes:
        return _i64(self.round) + (struct.pack(">I", self.region_cells) if self.region_cells else b"")

    @classmethod
    def read(cls, r: Reader, limits: MessageLimits) -> "InitialStatesRequest":
        round_ = _read_i64(r)
        trailer = r.remaining() > 0
        region_cells = r.u32() if trailer else 0
        if trailer and region_cells == 0:       # one encoding per message: 0 is sent as no trailer
            _fail(MALFORMED, "region_cells trailer of 0")
        return _build(cls, limits, round=round_, region_cells=region_cells)


@dataclass(frozen=True)
class CellReleaseRequest(_Wire):
    """Coordinator → device: make the device's visited vector over the public cell table its pending vector for
    the next secure round — 1 on its ``max_cells`` most-visited squares, 0 elsewhere
    (:func:`pategail.sdk.cell_universe.visited_vector`; L2 norm ≤ √max_cells), released with Gaussian noise
    and thresholded into the run's cell table (docs/cell-universe.md)."""

    round: int
    max_cells: int
    KIND: ClassVar[int] = KIND_CELL_RELEASE_REQUEST

    def __post_init__(self) -> None:
        self.validate(DEFAULT_LIMITS)

    def validate(self, limits: MessageLimits) -> None:
        _check_round(self.round, limits)
        if isinstance(self.max_cells, bool) or not isinstance(self.max_cells, (int, np.integer)) \
                or not 1 <= self.max_cells < 1 << 31:
            _fail(MALFORMED, f"max_cells {self.max_cells!r} is not a positive count of cells")

    def body(self) -> bytes:
        return _i64(self.round) + struct.pack(">I", self.max_cells)

    @classmethod
    def read(cls, r: Reader, limits: MessageLimits) -> "CellReleaseRequest":
        round_ = _read_i64(r)
        return _build(cls, limits, round=round_, max_cells=r.u32())


@dataclass(frozen=True, eq=False)
class FedAvgRequest(_Wire):
    """Coordinator → device: one round of DP-FedAvg (:mod:`pategail.sdk.fedavg_round`). The device loads the
    global policy ``parameters`` (float32, the bundle's ``policy_training.parameters`` order) into its policy
    training session, runs ``epochs`` passes of SGD at ``learning_rate`` over its own days in minibatches of
    ``batch_size`` days, and keeps its model delta, L2-clipped to ``clip_norm`` and divided by it, as its pending
    vector for the secure aggregation that follows."""

    round: int
    epochs: int
    batch_size: int
    learning_rate: float
    clip_norm: float
    parameters: np.ndarray
    KIND: ClassVar[int] = KIND_FEDAVG_REQUEST

    def __post_init__(self) -> None:
        self.validate(DEFAULT_LIMITS)

    def validate(self, limits: MessageLimits) -> None:
        _check_round(self.round, limits)
        counts: tuple[tuple[str, int, int], ...] = (("epochs", self.epochs, limits.max_k_steps),
                                                    ("batch_size", self.batch_size, limits.max_batch_size))
        for name, v, hi in counts:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                _fail(MALFORMED, f"{name} must be an integer")
            if not 1 <= v <= hi:
                _fail(TOO_LARGE if v > hi else MALFORMED, f"{name} = {v}, outside [1, {hi}]")
        for name, x in (("learning_rate", self.learning_rate), ("clip_norm", self.clip_norm)):
            if not isinstance(x, (int, float, np.floating)) or isinstance(x, bool) or not np.isfinite(x) or x <= 0:
                _fail(MALFORMED, f"{name} must be a finite number > 0, got {x!r}")
        flat = np.asarray(self.parameters)
        if flat.ndim != 1 or not len(flat) or not np.issubdtype(flat.dtype, np.floating):
            _fail(SHAPE, f"parameters: expected a non-empty float vector, got {flat.dtype} {flat.shape}")
        if 4 * len(flat) > limits.max_policy_bytes:
            _fail(TOO_LARGE, f"{len(flat)} parameters, above the limit of {limits.max_policy_bytes} bytes")
        if not np.isfinite(flat).all():
            _fail(NON_FINITE, "parameters: NaN or Inf")
        flat = np.ascontiguousarray(flat, dtype=np.float32)
        flat.flags.writeable = False
        object.__setattr__(self, "parameters", flat)

    def body(self) -> bytes:
        w = Writer().raw(_i64(self.round)).u32(self.epochs).u32(self.batch_size).f64(self.learning_rate)
        return w.f64(self.clip_norm).u32(len(self.parameters)).raw(self.parameters.astype("<f4").tobytes()).bytes()

    @classmethod
    def read(cls, r: Reader, limits: MessageLimits) -> "FedAvgRequest":
        round_, epochs, batch, lr, clip, n = _read_i64(r), r.u32(), r.u32(), r.f64(), r.f64(), r.u32()
        if 4 * n > limits.max_policy_bytes:
            _fail(TOO_LARGE, f"{n} parameters, above the limit of {limits.max_policy_bytes} bytes")
        return _build(cls, limits, round=round_, epochs=epochs, batch_size=batch, learning_rate=lr, clip_norm=clip,
                      parameters=np.frombuffer(r.raw(4 * n), dtype="<f4"))


@dataclass(frozen=True)
class Ack(_Wire):
    """Device → coordinator: request ``kind`` (a :data:`KIND_NAMES` value) of ``round`` was carried out;
    ``n`` = length of the pending vector it produced (0 for a policy update). It carries nothing computed
    from the owner's days — no loss, no accuracy, no count of days."""

    round: int
    kind: str
    n: int
    KIND: ClassVar[int] = KIND_ACK

    def __post_init__(self) -> None:
        self.validate(DEFAULT_LIMITS)

    def validate(self, limits: MessageLimits) -> None:
        _check_round(self.round, limits)
        if self.kind not in (KIND_NAMES[KIND_POLICY_UPDATE], KIND_NAMES[KIND_ROUND_REQUEST],
                             KIND_NAMES[KIND_INITIAL_STATES_REQUEST], KIND_NAMES[KIND_FEDAVG_REQUEST],
                             KIND_NAMES[KIND_CELL_RELEASE_REQUEST]):
            _fail(MALFORMED, f"unknown acknowledged kind {self.kind!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or not 0 <= self.n < 1 << 32:
            _fail(MALFORMED, "n must be an integer in [0, 2^32)")

    def body(self) -> bytes:
        return Writer().raw(_i64(self.round)).u8(_KIND_CODES[self.kind]).u32(self.n).bytes()

    @classmethod
    def read(cls, r: Reader, limits: MessageLimits) -> "Ack":
        round_, code, n = _read_i64(r), r.u8(), r.u32()
        if code not in KIND_NAMES:
            _fail(MALFORMED, f"unknown acknowledged kind {code}")
        return _build(cls, limits, round=round_, kind=KIND_NAMES[code], n=n)


@dataclass(frozen=True)
class ErrorReply(_Wire):
    """Device → coordinator: the request of ``round`` (:data:`NO_ROUND` if unreadable) was refused;
    ``code`` is one of :data:`ERROR_CODES`, ``message`` a one-line reason (never data of the owner)."""

    round: int
    code: str
    message: str
    KIND: ClassVar[int] = KIND_ERROR

    def __post_init__(self) -> None:
        self.validate(DEFAULT_LIMITS)

    def validate(self, limits: MessageLimits) -> None:
        _check_round(self.round, limits, allow_none=True)
        if self.code not in ERROR_CODES:
            _fail(MALFORMED, f"unknown error code {self.code!r}")
        if not isinstance(self.message, str) or len(self.message) > limits.max_text:
            _fail(MALFORMED, f"message must be a string of at most {limits.max_text} characters")

    def body(self) -> bytes:
        return Writer().raw(_i64(self.round)).blob(self.code.encode()).blob(self.message.encode("utf-8")).bytes()

    @classmethod
    def read(cls, r: Reader, limits: MessageLimits) -> "ErrorReply":
        round_ = _read_i64(r)
        try:
            code = r.blob(64).decode("ascii")
            message = r.blob(4 * limits.max_text).decode("utf-8")
        except UnicodeDecodeError:
            _fail(MALFORMED, "error reply text is not UTF-8")
        return _build(cls, limits, round=round_, code=code, message=message)

    @classmethod
    def from_error(cls, round_: int, err: MessageError, limits: MessageLimits = DEFAULT_LIMITS) -> "ErrorReply":
        text = " ".join(str(err).split())[: limits.max_text]
        return cls(round_, err.code, text)


Message = Union[PolicyUpdate, RoundRequest, InitialStatesRequest, FedAvgRequest, CellReleaseRequest, Ack, ErrorReply]
_TYPES = {t.KIND: t for t in (PolicyUpdate, RoundRequest, InitialStatesRequest, FedAvgRequest, CellReleaseRequest,
                              Ack, ErrorReply)}


# ---------------------------------------------------------------------------------------------- framing
def _i64(v: int) -> bytes:
    return struct.pack(">q", int(v))


def _read_i64(r: Reader) -> int:
    value: int = struct.unpack(">q", r.raw(8))[0]
    return value


_M = TypeVar("_M", bound=_Wire)


def _build(cls: type[_M], limits: MessageLimits, n_cells: int | None = None, **fields: Any) -> _M:
    """Construct without the default-limit check, then validate with the receiver's limits."""
    obj = object.__new__(cls)
    for k, v in fields.items():
        object.__setattr__(obj, k, v)
    if cls is RoundRequest:
        obj.validate(limits, n_cells)
    else:
        obj.validate(limits)
    return obj


def to_bytes(message: Message) -> bytes:
    """The frame of ``message``."""
    body = message.body()
    return _HEAD.pack(MAGIC, PROTOCOL_VERSION, message.KIND, len(body)) + body


def peek_round(data: bytes) -> int:
    """The round field of a frame, or :data:`NO_ROUND` when it cannot be read (for error replies)."""
    try:
        if len(data) >= _HEAD.size + 8 and bytes(data[:4]) == MAGIC and data[5] in _TYPES:
            v = struct.unpack_from(">q", data, _HEAD.size)[0]
            return v if 0 <= v <= DEFAULT_LIMITS.max_round else NO_ROUND
    except (TypeError, struct.error):
        pass
    return NO_ROUND


def from_bytes(data: bytes, *, limits: MessageLimits = DEFAULT_LIMITS, n_cells: int | None = None,
               expect: type | tuple[type, ...] | None = None) -> Message:
    """Decode and validate one frame; ``n_cells`` (the receiver's cell table) bounds cell ids; ``expect``
    restricts the accepted message types. Raises MessageError (with its ``code``) on anything wrong."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        _fail(MALFORMED, f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < _HEAD.size:
        _fail(MALFORMED, "message too short")
    magic, version, kind, n = _HEAD.unpack_from(data)
    if magic != MAGIC:
        _fail(MALFORMED, "not a device-protocol message")
    if version != PROTOCOL_VERSION:
        _fail(VERSION, f"protocol version {version}, this device speaks {PROTOCOL_VERSION}")
    if kind not in _TYPES:
        _fail(MALFORMED, f"unknown message kind {kind}")
    cls = _TYPES[kind]
    if expect is not None and not issubclass(cls, expect):
        _fail(MALFORMED, f"unexpected message kind {KIND_NAMES[kind]}")
    if _HEAD.size + n != len(data):
        _fail(MALFORMED, "bad message length")
    r = Reader(data[_HEAD.size:])
    try:
        msg = cls.read(r, limits, n_cells) if cls is RoundRequest else cls.read(r, limits)
        r.done()
    except MessageRejected as e:       # the wire reader's "truncated" / "trailing bytes" / "field too long"
        raise MessageError(MALFORMED, str(e)) from None
    return msg
