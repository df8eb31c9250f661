"""A device's ONNX Runtime sessions can be released between requests and reopened from its files without any
change in what it computes (the emulator releases them to keep a many-device process small)."""
from dataclasses import replace

import numpy as np

from pategail.sdk.messages import Ack, PolicyUpdate, from_bytes, to_bytes


def _rounds(device, round_request, release: bool, n: int = 3):
    """Pending vectors and discriminator parameters after each of ``n`` rounds."""
    out = []
    for r in range(1, n + 1):
        reply = from_bytes(device.handle(to_bytes(replace(round_request, round=r))))
        assert isinstance(reply, Ack), reply
        if release:
            device.release_sessions()
            assert device._session is None
        out.append((device.pending, device.discriminator_parameters()))
        if release:
            device.release_sessions()
    return out


def test_released_sessions_reopen_to_the_same_training(make_device, round_request):
    kept = _rounds(make_device(0, device_id=1, seed=5), round_request, release=False)
    released = _rounds(make_device(0, device_id=2, seed=5), round_request, release=True)
    for (pending_a, params_a), (pending_b, params_b) in zip(kept, released):
        assert np.array_equal(pending_a, pending_b)          # bit for bit: the Adam moments and step survive
        assert np.array_equal(params_a, params_b)
    assert not np.array_equal(kept[0][1], kept[-1][1])        # the discriminator did train


def test_a_round_sent_again_after_a_release_is_replayed(make_device, round_request):
    device = make_device(0, device_id=3, seed=5)
    device.handle(to_bytes(round_request))
    first = device.pending, device.discriminator_parameters()
    device.release_sessions()
    device.rng = np.random.default_rng(5)                     # the emulator re-derives it for the round
    device.handle(to_bytes(round_request))                    # the coordinator restarted: same round again
    assert np.array_equal(device.pending, first[0])
    assert np.array_equal(device.discriminator_parameters(), first[1])


def test_the_policy_opens_only_to_generate_and_reopens_after_a_release(make_device, policy_bytes):
    device = make_device(0, device_id=4)
    assert device._policy is None and device._step_session is None      # nothing opened by installing
    model = policy_bytes(5, device.n_cells)
    assert isinstance(from_bytes(device.handle(PolicyUpdate.for_model(2, model).to_bytes())), Ack)
    assert device._policy is None                                       # checked, not kept open
    a = device.generate(3, np.random.default_rng(0)).days
    assert device._policy is not None
    device.release_sessions()
    b = device.generate(3, np.random.default_rng(0)).days
    assert np.array_equal(a, b)
