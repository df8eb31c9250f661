"""The personal discriminator D_u on disk: its ONNX Runtime checkpoint (optimizer state included), the bundle
it belongs to, and the snapshot taken before each round so that a round sent again is replayed, not trained
twice.

- ``discriminator.ckpt``, ``discriminator.ckpt.bundle`` (the SHA-256 of its bundle): kept while the bundle
  stays; a checkpoint of another bundle, or an unreadable one, is replaced by the bundle's (with a warning);
- ``discriminator.before-round.ckpt``, ``discriminator.round``: the checkpoint as it was before the last
  round request, and that request's mark (bundle and round number);
- ``discriminator.replay.npy``, ``discriminator.before-round.replay.npy``: when the bundle declares replay
  (:mod:`pategail.sdk.replay`), the buffer of earlier generated pairs that goes with each of the two
  checkpoints. It belongs to the checkpoint: a checkpoint started again from the bundle starts an empty buffer.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from pategail.sdk.bundle import Bundle, TrainingSession, open_training_session
from pategail.sdk.files import replacing, write_atomic
from pategail.sdk.replay import ReplaySettings, empty_buffer, validate_buffer

log = logging.getLogger(__name__)

CHECKPOINT = "discriminator.ckpt"
CHECKPOINT_TAG = "discriminator.ckpt.bundle"
BEFORE_ROUND = "discriminator.before-round.ckpt"
"""The checkpoint as it was before the last round request, and (in ``ROUND_TAG``) that round's number: a
coordinator that crashed mid-round sends the same round again, and the device replays it from here instead
of training twice — so a resumed run ends exactly where an uninterrupted one would."""
ROUND_TAG = "discriminator.round"
REPLAY = "discriminator.replay.npy"
BEFORE_ROUND_REPLAY = "discriminator.before-round.replay.npy"


def open_checkpoint(root: Path, bundle: Bundle, device_id: int) -> TrainingSession:
    """The device's own checkpoint if it is this bundle's and readable; else the bundle's (saying why)."""
    ckpt, tag = root / CHECKPOINT, root / CHECKPOINT_TAG
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
            except Exception as err:                # noqa: BLE001 — whatever ORT raises, the file is unusable
                session, reason = None, f"corrupt ({type(err).__name__})"
    if reason is not None:
        log.warning("device %d: checkpoint %s %s; starting again from the bundle", device_id, ckpt, reason)
    if session is None:
        session = open_training_session(bundle)
        (root / REPLAY).unlink(missing_ok=True)      # the buffer went with the discarded checkpoint
        save_checkpoint(root, session, bundle)
    return session


def save_checkpoint(root: Path, session: TrainingSession, bundle: Bundle, replay: np.ndarray | None = None) -> None:
    """Write ``session``'s checkpoint, its bundle tag and, when given, the replay buffer that goes with it."""
    # checkpoint first, then its tag: a crash in between leaves a tag of the old bundle, so the next start
    # discards the new checkpoint (safe) rather than trusting a stale one
    with replacing(root / CHECKPOINT) as tmp:
        session.save_checkpoint(tmp)
    write_atomic(root / CHECKPOINT_TAG, (bundle.sha256 + "\n").encode("ascii"))
    if replay is not None:
        _save_buffer(root / REPLAY, replay)


def open_replay(root: Path, settings: ReplaySettings | None, device_id: int) -> np.ndarray | None:
    """The replay buffer saved with the checkpoint (None when the bundle declares no replay); an empty one
    when there is none yet, or when the file is unreadable or does not fit ``settings`` (saying why)."""
    if settings is None:
        return None
    return _load_buffer(root / REPLAY, settings, device_id)


def _save_buffer(path: Path, buffer: np.ndarray) -> None:
    with replacing(path) as tmp, open(tmp, "wb") as f:
        np.save(f, buffer, allow_pickle=False)


def _load_buffer(path: Path, settings: ReplaySettings, device_id: int) -> np.ndarray:
    if not path.is_file():
        return empty_buffer()
    try:
        return validate_buffer(np.load(path, allow_pickle=False), settings)
    except (ValueError, OSError, EOFError) as err:
        log.warning("device %d: replay buffer %s unusable (%s); starting an empty one", device_id, path, err)
        return empty_buffer()


def before_round(root: Path, session: TrainingSession, bundle: Bundle, bundle_sha256: str, round_: int,
                 device_id: int, replay: np.ndarray | None = None) -> tuple[TrainingSession, np.ndarray | None]:
    """The session and replay buffer a round request starts from: for a round seen before (same bundle, same
    number) the snapshots taken before it, otherwise ``session`` and ``replay`` themselves, after
    snapshotting them. ``bundle_sha256`` is the hash the bundle had when it was opened; ``replay`` is None
    when the bundle declares no replay."""
    before, tag = root / BEFORE_ROUND, root / ROUND_TAG
    # the tag names the bundle too: a round number of another run or bundle never rewinds this one
    mark = f"{bundle_sha256} {round_}"
    if tag.is_file() and tag.read_text().strip() == mark and before.is_file():
        log.info("device %d: round %d again (the coordinator restarted); replaying it from the checkpoint "
                 "taken before it", device_id, round_)
        if replay is not None:
            assert bundle.replay is not None            # a buffer is kept only when the bundle declares replay
            replay = _load_buffer(root / BEFORE_ROUND_REPLAY, bundle.replay, device_id)
        return open_training_session(bundle, before), replay
    with replacing(before) as tmp:
        session.save_checkpoint(tmp)
    if replay is not None:
        _save_buffer(root / BEFORE_ROUND_REPLAY, replay)
    # the mark last: a crash before it leaves the old mark, so the round counts as new and is snapshotted again
    write_atomic(tag, f"{mark}\n".encode("ascii"))
    return session, replay
