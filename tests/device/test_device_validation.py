"""Every refused request gets an ErrorReply (with the request's round and a code) and leaves the device
exactly as it was: the checkpoint file, the pending vector, the policy in use and the stored days."""
from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest

from pategail.sdk import messages as m
from pategail.sdk.messages import (Ack, ErrorReply, InitialStatesRequest, MessageLimits, PolicyUpdate, from_bytes)



def _state(device) -> tuple:
    files = ["discriminator.ckpt", "discriminator.ckpt.bundle", "days.npy", "policy.onnx", "policy.json"]
    digests = tuple(hashlib.sha256((device.root / f).read_bytes()).hexdigest() if (device.root / f).exists()
                    else None for f in files)
    pending = device.pending
    return digests, None if pending is None else pending.tobytes(), device.policy_sha256, \
        device.discriminator_parameters().tobytes()


@pytest.fixture(scope="module")
def nan_policy(dataset, policy_bytes):
    return policy_bytes(3, dataset.n_cells, nan=True)


def _bad_requests(round_request, n_cells, nan_policy, raw_round_request):
    days, homes, actions = round_request.days, round_request.homes, round_request.actions
    good = round_request.to_bytes()
    out_of_range = days.copy()
    out_of_range[3, 17] = n_cells
    negative = days.copy()
    negative[0, 0] = -1
    valid_policy = PolicyUpdate.for_model(9, b"\x08\x07not really onnx")
    return {
        "garbage": (b"\x00" * 40, m.MALFORMED, m.NO_ROUND),
        "wrong magic": (b"HTTP" + good[4:], m.MALFORMED, m.NO_ROUND),
        "unknown version": (good[:4] + bytes([m.PROTOCOL_VERSION + 1]) + good[5:], m.VERSION, 1),
        "unknown kind": (good[:5] + bytes([42]) + good[6:], m.MALFORMED, m.NO_ROUND),
        "truncated": (good[:-10], m.MALFORMED, 1),
        "trailing bytes": (good + b"\x00" * 4, m.MALFORMED, 1),
        "a device message sent to a device": (Ack(1, "round_request", 3).to_bytes(), m.MALFORMED, 1),
        "days announced but missing": (raw_round_request(1, 5, 8, days[:-1], homes[:-1], actions[:-1],
                                                         n=len(days)),
                                       m.MALFORMED, 1),
        "oversized batch of days": (raw_round_request(1, 5, 8, np.zeros((13, 48)), np.zeros(13),
                                                      np.zeros((13, 47))), m.TOO_LARGE, 1),
        "too many steps": (raw_round_request(1, 10_001, 8, days, homes, actions), m.TOO_LARGE, 1),
        "oversized minibatch": (raw_round_request(1, 5, 1 << 20, days, homes, actions), m.TOO_LARGE, 1),
        "cell id beyond the table": (raw_round_request(1, 5, 8, out_of_range, homes, actions), m.CELL_RANGE, 1),
        "negative cell id": (raw_round_request(1, 5, 8, negative, homes, actions), m.CELL_RANGE, 1),
        "home beyond the table": (raw_round_request(1, 5, 8, days, homes + n_cells, actions), m.CELL_RANGE, 1),
        "unknown action": (raw_round_request(1, 5, 8, days, homes, actions + 4), m.MALFORMED, 1),
        "policy with the wrong hash": (m.to_bytes(_unchecked_policy_update(9, "0" * 64, b"model")), m.HASH, 9),
        "policy that is not ONNX": (valid_policy.to_bytes(), m.INCOMPATIBLE, 9),
        "policy with NaN weights": (PolicyUpdate.for_model(9, nan_policy).to_bytes(), m.NON_FINITE, 9),
    }


def _unchecked_policy_update(rnd, digest, model):
    obj = object.__new__(PolicyUpdate)
    for k, v in dict(round=rnd, policy_sha256=digest, policy_onnx=model).items():
        object.__setattr__(obj, k, v)
    return obj


def test_every_refused_request_leaves_the_device_unchanged(make_device, round_request, dataset, nan_policy,
                                                          raw_round_request):
    device = make_device(1, limits=MessageLimits(max_days=12))
    assert isinstance(from_bytes(device.handle(round_request.to_bytes())), Ack)   # a pending vector exists
    before = _state(device)
    assert before[1] is not None
    cases = _bad_requests(round_request, dataset.n_cells, nan_policy, raw_round_request)
    for name, (data, code, rnd) in cases.items():
        reply = from_bytes(device.handle(data))
        assert isinstance(reply, ErrorReply), name
        assert (reply.code, reply.round) == (code, rnd), (name, reply)
        assert _state(device) == before, name
    # the device still works after all that
    assert isinstance(from_bytes(device.handle(InitialStatesRequest(2).to_bytes())), Ack)


def test_an_updated_policy_survives_refused_updates(make_device, dataset, nan_policy, policy_bytes):
    device = make_device(0)
    good = PolicyUpdate.for_model(3, policy_bytes(11, dataset.n_cells))
    assert from_bytes(device.handle(good.to_bytes())) == Ack(3, "policy_update", 0)
    before = _state(device)
    assert before[0][3] is not None                                   # policy.onnx written
    for data in [PolicyUpdate.for_model(4, nan_policy).to_bytes(),
                 m.to_bytes(_unchecked_policy_update(4, good.policy_sha256, good.policy_onnx[:-1]))]:
        assert isinstance(from_bytes(device.handle(data)), ErrorReply)
        assert _state(device) == before


def test_error_replies_carry_no_data_of_the_owner(make_device, round_request, dataset, nan_policy,
                                                 raw_round_request):
    """Two devices with different owners refuse the same requests with byte-identical replies: nothing in an
    ErrorReply depends on the days a device holds."""
    a, b = (make_device(i, limits=MessageLimits(max_days=12)) for i in (3, 6))
    assert a.store.home != b.store.home and len(a.store) != len(b.store)
    for data, _, _ in _bad_requests(round_request, dataset.n_cells, nan_policy, raw_round_request).values():
        assert a.handle(data) == b.handle(data)


def test_round_request_with_float_days_is_refused_at_the_coordinator():
    with pytest.raises(m.MessageError) as err:
        m.RoundRequest(1, 5, 8, np.full((1, 48), np.inf), np.zeros(1), np.zeros((1, 47)))
    assert err.value.code == m.NON_FINITE


def test_header_length_lies_are_refused(make_device, round_request):
    device = make_device(0)
    data = bytearray(round_request.to_bytes())
    struct.pack_into(">I", data, 6, len(data))                     # body length larger than what follows
    reply = from_bytes(device.handle(bytes(data)))
    assert isinstance(reply, ErrorReply) and reply.code == m.MALFORMED
