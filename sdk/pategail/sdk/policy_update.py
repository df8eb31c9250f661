"""The policy a device generates with: the bundle's, or the latest one the coordinator sent (PolicyUpdate).

An update is accepted only when its bytes hash to the announced SHA-256, it has the bundle's policy interface,
and a probe over every cell id and slot position gives finite log-probabilities. The accepted model is kept in
``policy.onnx`` with ``policy.json`` (its hash, round and bundle); a new bundle brings its own policy.

Checking a model opens an ONNX Runtime session and runs the probe; the session is released afterwards (a device
opens the policy only to generate, :func:`open_policy_file`): kept, with its probe's buffers, it cost 17 MiB a
device, which a fleet of emulated devices paid for every one of them when the coordinator published a policy.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pategail.sdk.bundle import Bundle, session_options, sha256_file
from pategail.sdk.errors import DeviceError
from pategail.sdk.features import action_mask
from pategail.sdk.files import write_atomic
from pategail.sdk.generate import (POLICY_INPUT_CELLS, POLICY_INPUT_FEATURES, POLICY_INPUT_MASK,
                                   POLICY_OUTPUT_LOG_PROBS, prefix_features)
from pategail.sdk.messages import HASH, INCOMPATIBLE, NON_FINITE, MessageError, PolicyUpdate, sha256_hex

if TYPE_CHECKING:
    import onnxruntime as ort

log = logging.getLogger(__name__)

POLICY_FILE = "policy.onnx"
POLICY_META = "policy.json"


def check_policy_model(model: bytes, bundle: Bundle) -> ort.InferenceSession:
    """An InferenceSession on ``model``, checked against the bundle's policy interface and probed once:
    every cell id and every slot position must give finite log-probabilities (MessageError otherwise).
    The session has no memory arena: a caller that only checks does not keep the probe's buffers."""
    import onnxruntime as ort

    try:
        session = ort.InferenceSession(model, session_options(1, arena=False), providers=["CPUExecutionProvider"])
    except Exception as err:                         # noqa: BLE001 — ORT raises several types for a bad model
        raise MessageError(INCOMPATIBLE, f"not a loadable ONNX model ({type(err).__name__})") from None
    names = ({i.name for i in session.get_inputs()}, {o.name for o in session.get_outputs()})
    if names != (set(bundle.policy.input_names), set(bundle.policy.output_names)):
        raise MessageError(INCOMPATIBLE, "the model's inputs/outputs are not the bundle's policy interface")
    assert bundle.environment is not None              # an installed bundle has one
    cells = bundle.environment.cells
    n, slots = len(cells), int(bundle.manifest["features"]["slots"])
    probe = np.resize(np.arange(n, dtype=np.int32), (-(-n // slots), slots))
    homes = probe[:, 0]
    try:
        (log_probs,) = session.run([POLICY_OUTPUT_LOG_PROBS], {
            POLICY_INPUT_CELLS: probe.astype(np.int64), POLICY_INPUT_FEATURES: prefix_features(probe, homes, cells),
            POLICY_INPUT_MASK: action_mask(probe, homes)})
    except Exception as err:                         # noqa: BLE001
        raise MessageError(INCOMPATIBLE, f"the model does not run on policy inputs ({type(err).__name__})") \
            from None
    if log_probs.shape != probe.shape + (4,):
        raise MessageError(INCOMPATIBLE, f"log_probs of shape {log_probs.shape}, expected {probe.shape + (4,)}")
    if not np.isfinite(log_probs).all():
        raise MessageError(NON_FINITE, "the policy gives NaN or Inf log-probabilities")
    return session


def policy_in_use(root: Path, bundle: Bundle, device_id: int) -> tuple[Path, str]:
    """(model file, SHA-256) of the policy in use: the accepted update kept in ``root`` if it belongs to this
    bundle and is intact (hash, interface and probe checked here), otherwise the bundle's own (a corrupt update
    is deleted, with a warning)."""
    path, meta = root / POLICY_FILE, root / POLICY_META
    if path.is_file() and meta.is_file():
        try:
            info = json.loads(meta.read_text(encoding="utf-8"))
            if info["bundle_sha256"] != bundle.sha256:              # a new bundle brings its own policy
                info = None
            ok = info is not None and sha256_file(path) == info["sha256"]
        except (ValueError, KeyError, TypeError):
            info, ok = {}, False
        if ok:
            try:
                check_policy_model(path.read_bytes(), bundle)
                return path, info["sha256"]
            except MessageError:
                pass
        if info is not None:
            log.warning("device %d: the accepted policy %s is corrupt; using the bundle's policy", device_id, path)
    for p in (path, meta):
        p.unlink(missing_ok=True)
    return bundle.policy.path, bundle.manifest["files"][bundle.policy.path.name]["sha256"]


def open_policy_file(path: Path, sha256: str) -> ort.InferenceSession:
    """An InferenceSession on the policy model at ``path``, whose bytes must still hash to ``sha256`` (the
    file was checked when it was accepted or installed); DeviceError otherwise."""
    import onnxruntime as ort

    model = path.read_bytes()
    if sha256_hex(model) != sha256:
        raise DeviceError(f"{path}: the policy model changed on disk since it was checked; install the bundle "
                          "again")
    return ort.InferenceSession(model, session_options(1), providers=["CPUExecutionProvider"])


def accept_policy(root: Path, update: PolicyUpdate, bundle: Bundle) -> Path:
    """Check ``update`` (hash, interface, probe) and keep it in ``root``; returns the file it is kept in.
    MessageError (nothing written) when it is refused."""
    if sha256_hex(update.policy_onnx) != update.policy_sha256:
        raise MessageError(HASH, "the policy's SHA-256 differs from the announced one")
    check_policy_model(update.policy_onnx, bundle)
    write_atomic(root / POLICY_FILE, update.policy_onnx)
    meta = {"sha256": update.policy_sha256, "round": update.round, "bundle_sha256": bundle.sha256}
    write_atomic(root / POLICY_META, json.dumps(meta).encode("utf-8"))
    return root / POLICY_FILE
