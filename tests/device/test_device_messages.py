"""Device protocol messages: bytes round-trip, and every malformed or out-of-bounds frame is refused with a
code (the decoder never allocates what the limits forbid)."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk import messages as m
from pategail.sdk.messages import (Ack, ErrorReply, InitialStatesRequest, MessageError, MessageLimits,
                                   PolicyUpdate, RoundRequest, from_bytes)


def _request(n=3, k=5, b=8, rnd=7, seed=0):
    rng = np.random.default_rng(seed)
    return RoundRequest(rnd, k, b, rng.integers(0, 100, (n, 48)), rng.integers(0, 100, n),
                        rng.integers(0, 4, (n, 47)))


def test_every_message_round_trips():
    req = _request()
    back = RoundRequest.from_bytes(req.to_bytes(), n_cells=100)
    assert (back.round, back.k_steps, back.batch_size) == (7, 5, 8)
    for a, b in [(back.days, req.days), (back.homes, req.homes), (back.actions, req.actions)]:
        np.testing.assert_array_equal(a, b)
    assert back.days.dtype == np.int32 and back.homes.dtype == np.int32 and back.actions.dtype == np.int8
    assert back.n_queries == 3 * 47
    for msg in [PolicyUpdate.for_model(3, b"\x08\x01onnx"), InitialStatesRequest(4), Ack(5, "round_request", 141),
                Ack(0, "policy_update", 0), ErrorReply(6, m.CELL_RANGE, "cell ids must be < 4210 ✓"),
                ErrorReply(m.NO_ROUND, m.MALFORMED, "")]:
        data = msg.to_bytes()
        assert data[:4] == b"PGDV" and data[4] == m.PROTOCOL_VERSION
        assert type(msg).from_bytes(data) == msg == from_bytes(data)


def test_hand_written_frame_equals_the_encoder(raw_round_request):
    req = _request()
    assert raw_round_request(7, 5, 8, req.days, req.homes, req.actions) == req.to_bytes()


def test_arrays_are_frozen():
    req = _request()
    with pytest.raises(ValueError):
        req.days[0, 0] = 1


def _code(data, **kw):
    with pytest.raises(MessageError) as err:
        from_bytes(data, **kw)
    return err.value.code


def test_framing_errors():
    good = InitialStatesRequest(1).to_bytes()
    assert _code(b"") == m.MALFORMED
    assert _code(b"XXXX" + good[4:]) == m.MALFORMED
    assert _code(good[:4] + bytes([2]) + good[5:]) == m.VERSION
    assert _code(good[:5] + bytes([99]) + good[6:]) == m.MALFORMED
    assert _code(good + b"\x00") == m.MALFORMED                        # length field disagrees
    assert _code(good[:-1]) == m.MALFORMED
    assert _code("not bytes") == m.MALFORMED
    with pytest.raises(MessageError, match="unexpected message kind"):
        RoundRequest.from_bytes(good)


def test_round_request_bounds(raw_round_request):
    rng = np.random.default_rng(1)
    days, homes, actions = rng.integers(0, 10, (4, 48)), rng.integers(0, 10, 4), rng.integers(0, 4, (4, 47))
    small = MessageLimits(max_days=3, max_k_steps=20, max_batch_size=16)
    assert _code(raw_round_request(1, 5, 8, days, homes, actions), limits=small) == m.TOO_LARGE
    assert _code(raw_round_request(1, 21, 8, days[:2], homes[:2], actions[:2]), limits=small) == m.TOO_LARGE
    assert _code(raw_round_request(1, 5, 17, days[:2], homes[:2], actions[:2]), limits=small) == m.TOO_LARGE
    # a header announcing 2^31 days is refused before anything is read or allocated
    assert _code(raw_round_request(1, 5, 8, days, homes, actions, n=1 << 31)) == m.TOO_LARGE
    # announced 5 days, carries 4: truncated
    assert _code(raw_round_request(1, 5, 8, days, homes, actions, n=5)) == m.MALFORMED
    assert from_bytes(raw_round_request(1, 5, 8, days, homes, actions), n_cells=10).n_queries == 4 * 47
    assert _code(raw_round_request(1, 5, 8, days, homes, actions), n_cells=5) == m.CELL_RANGE
    bad = days.copy()
    bad[1, 3] = -2
    assert _code(raw_round_request(1, 5, 8, bad, homes, actions)) == m.CELL_RANGE
    assert _code(raw_round_request(1, 5, 8, days, homes + 10, actions), n_cells=10) == m.CELL_RANGE
    assert _code(raw_round_request(1, 5, 8, days, homes, actions + 4)) == m.MALFORMED
    assert _code(raw_round_request(1, 5, 1, days, homes, actions)) == m.MALFORMED          # batch < 2
    assert _code(raw_round_request(-3, 5, 8, days, homes, actions)) == m.MALFORMED
    assert _code(raw_round_request(1, 5, 8, days[:0], homes[:0], actions[:0])) == m.SHAPE


def test_constructors_validate_too():
    ok = _request()
    with pytest.raises(MessageError) as err:
        RoundRequest(1, 5, 8, np.full((2, 48), np.nan), ok.homes[:2], ok.actions[:2])
    assert err.value.code == m.NON_FINITE
    with pytest.raises(MessageError) as err:
        RoundRequest(1, 5, 8, ok.days[:, :47], ok.homes, ok.actions)
    assert err.value.code == m.SHAPE
    with pytest.raises(MessageError) as err:
        RoundRequest(1, 5, 8, ok.days, ok.homes[:2], ok.actions)
    assert err.value.code == m.SHAPE
    with pytest.raises(MessageError) as err:
        RoundRequest(1, 10_001, 8, ok.days, ok.homes, ok.actions)
    assert err.value.code == m.TOO_LARGE
    with pytest.raises(MessageError):
        RoundRequest(1, 5.0, 8, ok.days, ok.homes, ok.actions)
    with pytest.raises(MessageError):
        PolicyUpdate(1, "ab" * 31, b"x")
    with pytest.raises(MessageError):
        Ack(1, "loss", 3)
    with pytest.raises(MessageError):
        ErrorReply(1, "oops", "")


def test_policy_update_size_limit_is_checked_before_reading():
    upd = PolicyUpdate.for_model(1, b"x" * 100)
    assert _code(upd.to_bytes(), limits=MessageLimits(max_policy_bytes=99)) == m.TOO_LARGE


def test_peek_round():
    assert m.peek_round(InitialStatesRequest(12).to_bytes()) == 12
    assert m.peek_round(b"junk") == m.NO_ROUND


def test_initial_states_request_region_trailer():
    plain = InitialStatesRequest(0).to_bytes()
    with_regions = InitialStatesRequest(0, 64)
    data = with_regions.to_bytes()
    body = m._HEAD.size
    assert data[body:-4] == plain[body:] and len(data) == len(plain) + 4       # the same body + a 4-byte trailer
    assert data[-4:] == (64).to_bytes(4, "big")
    assert InitialStatesRequest.from_bytes(data) == with_regions and InitialStatesRequest.from_bytes(plain).region_cells == 0
    # one encoding per message: an explicit trailer of 0 is refused, as is a short one
    head = m._HEAD.pack(m.MAGIC, m.PROTOCOL_VERSION, m.KIND_INITIAL_STATES_REQUEST, 12)
    assert _code(head + (0).to_bytes(8, "big") + (0).to_bytes(4, "big")) == m.MALFORMED
    head = m._HEAD.pack(m.MAGIC, m.PROTOCOL_VERSION, m.KIND_INITIAL_STATES_REQUEST, 10)
    assert _code(head + (0).to_bytes(8, "big") + (64).to_bytes(2, "big")) == m.MALFORMED
    with pytest.raises(MessageError):
        InitialStatesRequest(0, -1)
