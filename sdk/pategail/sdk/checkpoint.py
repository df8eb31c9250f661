"""The personal discriminator D_u on disk: its ONNX Runtime checkpoint (optimizer state included), the bundle
it belongs to, and the snapshot taken before each round so that a round sent again is replayed, not trained
twice.

- ``discriminator.ckpt``, ``discriminator.ckpt.bundle`` (the SHA-256 of its bundle): kept while the bundle
  stays; a checkpoint of another bundle, or an unreadable one, is replaced by the bundle's (with a warning);
- ``discriminator.before-round.ckpt``, ``discriminator.round``: the checkpoint as it was before the last
  round request, and that request's mark (bundle and round number).
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from pategail.sdk.bundle import Bundle, TrainingSession, open_training_session
from pategail.sdk.files import replacing, write_atomic

log = logging.getLogger(__name__)

CHECKPOINT = "discriminator.ckpt"
CHECKPOINT_TAG = "discriminator.ckpt.bundle"
BEFORE_ROUND = "discriminator.before-round.ckpt"
"""The checkpoint as it was before the last round request, and (in ``ROUND_TAG``) that round's number: a
coordinator that crashed mid-round sends the same round again, and the device replays it from here instead
of training twice — so a resumed run ends exactly where an uninterrupted one would."""
ROUND_TAG = "discriminator.round"


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
        save_checkpoint(root, session, bundle)
    return session


def save_checkpoint(root: Path, session: TrainingSession, bundle: Bundle) -> None:
    """Write ``session``'s checkpoint and its bundle tag."""
    # checkpoint first, then its tag: a crash in between leaves a tag of the old bundle, so the next start
    # discards the new checkpoint (safe) rather than trusting a stale one
    with replacing(root / CHECKPOINT) as tmp:
        session.save_checkpoint(tmp)
    write_atomic(root / CHECKPOINT_TAG, (bundle.sha256 + "\n").encode("ascii"))


def before_round(root: Path, session: TrainingSession, bundle: Bundle, bundle_sha256: str, round_: int,
                 device_id: int) -> TrainingSession:
    """The session a round request starts from: for a round seen before (same bundle, same number) the
    snapshot taken before it, otherwise ``session`` itself, after snapshotting it. ``bundle_sha256`` is the
    hash the bundle had when it was opened."""
    before, tag = root / BEFORE_ROUND, root / ROUND_TAG
    # the tag names the bundle too: a round number of another run or bundle never rewinds this one
    mark = f"{bundle_sha256} {round_}"
    if tag.is_file() and tag.read_text().strip() == mark and before.is_file():
        log.info("device %d: round %d again (the coordinator restarted); replaying it from the checkpoint "
                 "taken before it", device_id, round_)
        return open_training_session(bundle, before)
    with replacing(before) as tmp:
        session.save_checkpoint(tmp)
    # the mark last: a crash before it leaves the old mark, so the round counts as new and is snapshotted again
    write_atomic(tag, f"{mark}\n".encode("ascii"))
    return session
