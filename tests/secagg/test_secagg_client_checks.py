"""The device client's own checks, driven step by step against a real aggregator: every refused message
names what is wrong and leaves the client able to go on with the genuine one."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.secagg import MessageRejected, ProtocolError, RefusedUnmask, SecAggAbort
from pategail.sdk.secagg.client import Phase
from pategail.sdk.secagg.messages import (KIND_ACK_SET, KIND_KEY_BROADCAST, RelayedFrames, ShareDelivery, SurvivorSet,
                                         UnmaskShares, to_bitmap)
from pategail.server.secagg.aggregator import Aggregator
from pategail.server.secagg.config import SecureRoundConfig

M = 3


class Manual:
    """Coordinator, aggregator and n clients, advanced one protocol step at a time."""

    def __init__(self, federation, n=4, n_min=3, round_id=1):
        self.coordinator, self.clients, self.recorder = federation(n)
        self.ids = [c.device_id for c in self.clients]
        self.by_id = dict(zip(self.ids, self.clients))
        self.start = self.coordinator.new_round(SecureRoundConfig(round_id, n_min=n_min), self.ids, M)
        self.agg = Aggregator(self.start.config, self.coordinator.directory)

    def advertise(self, who=None):
        for d in who or self.ids:
            self.agg.receive_advertise(self.by_id[d].start_round(self.start.config, self.start.envelopes[d]))
        self.agg.close_advertise()

    def share(self, who=None):
        for d in who or self.ids:
            self.agg.receive_shares(self.by_id[d].share_keys(self.agg.key_broadcast(d)))
        self.agg.close_shares()

    def mask(self, who=None, values=None):
        for i, d in enumerate(who or self.ids):
            v = np.full(M, 0.25 * (i + 1)) if values is None else values[i]
            self.agg.receive_masked_input(self.by_id[d].masked_input(self.agg.share_delivery(d), v))
        self.agg.close_masked_input()

    def ack(self, who=None):
        for d in who or list(self.agg.inputs):
            self.agg.receive_ack(self.by_id[d].consistency_check(self.agg.survivor_set()))
        self.agg.close_acks()

    def unmask(self, who=None):
        for d in who or list(self.agg.acks):
            self.agg.receive_unmask(self.by_id[d].unmask(self.agg.ack_set(d)))


def test_a_device_that_is_not_a_participant_refuses_the_round(federation):
    run = Manual(federation)
    start = run.coordinator.new_round(SecureRoundConfig(2, n_min=2), run.ids[:3], M)
    with pytest.raises(ProtocolError, match="not a participant"):
        run.clients[3].start_round(start.config, start.envelopes[run.ids[0]])


def test_another_devices_envelope_is_refused_before_decryption(federation):
    run = Manual(federation)
    with pytest.raises(MessageRejected, match="another round or device"):
        run.clients[0].start_round(run.start.config, run.start.envelopes[run.ids[1]])
    later = run.coordinator.new_round(SecureRoundConfig(2, n_min=3), run.ids, M)
    with pytest.raises(MessageRejected, match="another round or device"):
        run.clients[0].start_round(later.config, run.start.envelopes[run.ids[0]])
    assert run.clients[0].phase is Phase.IDLE                      # a refused call changes nothing
    run.clients[0].start_round(run.start.config, run.start.envelopes[run.ids[0]])
    assert run.clients[0].phase is Phase.ADVERTISED


def test_steps_out_of_order_are_protocol_errors(federation):
    run = Manual(federation)
    with pytest.raises(ProtocolError, match="expected phase ADVERTISED"):
        run.clients[0].share_keys(RelayedFrames(KIND_KEY_BROADCAST, 1, run.agg.digest, ()).encode())
    run.advertise()
    with pytest.raises(ProtocolError, match="expected phase SHARED"):
        run.clients[0].masked_input(ShareDelivery(1, run.agg.digest, run.ids[0], ()).encode(), np.zeros(M))


def test_share_keys_checks_round_and_threshold(federation):
    run = Manual(federation, n=4, n_min=2)                          # threshold 3 of 4
    run.advertise()
    d = run.ids[0]
    broadcast = RelayedFrames.decode(run.agg.key_broadcast(d), KIND_KEY_BROADCAST)
    with pytest.raises(MessageRejected, match="round 9"):
        run.by_id[d].share_keys(RelayedFrames(KIND_KEY_BROADCAST, 9, run.agg.digest, broadcast.frames).encode())
    # one neighbour's keys only: 1 + 1 < t = 3
    with pytest.raises(SecAggAbort, match="threshold is 3"):
        run.by_id[d].share_keys(RelayedFrames(KIND_KEY_BROADCAST, 1, run.agg.digest, broadcast.frames[:1]).encode())
    # the same neighbour twice
    with pytest.raises(ProtocolError, match="repeated"):
        run.by_id[d].share_keys(RelayedFrames(KIND_KEY_BROADCAST, 1, run.agg.digest, broadcast.frames[:1] * 2).encode())
    # its own advert is not a neighbour's
    own = run.agg.adverts[d][1]
    with pytest.raises(ProtocolError, match="unexpected"):
        run.by_id[d].share_keys(
            RelayedFrames(KIND_KEY_BROADCAST, 1, run.agg.digest, (own,) + broadcast.frames[1:]).encode()
        )
    # exactly t - 1 neighbours plus itself is enough
    assert run.by_id[d].share_keys(RelayedFrames(KIND_KEY_BROADCAST, 1, run.agg.digest, broadcast.frames[:2]).encode())


def test_masked_input_checks_recipient_sender_and_shape(federation):
    run = Manual(federation)
    run.advertise()
    run.share()
    d, e = run.ids[0], run.ids[1]
    with pytest.raises(MessageRejected, match="another device"):
        run.by_id[d].masked_input(run.agg.share_delivery(e), np.zeros(M))
    delivery = ShareDelivery.decode(run.agg.share_delivery(d))
    with pytest.raises(ProtocolError, match="not a neighbour"):
        own = ShareDelivery(1, run.agg.digest, d, ((d, delivery.shares[0][1]),)).encode()
        run.by_id[d].masked_input(own, np.zeros(M))
    swapped = ((delivery.shares[0][0], delivery.shares[1][1]),) + delivery.shares[1:]
    with pytest.raises(MessageRejected):                          # a share sealed for another pair
        run.by_id[d].masked_input(ShareDelivery(1, run.agg.digest, d, swapped).encode(), np.zeros(M))
    with pytest.raises(ValueError, match="shape"):
        run.by_id[d].masked_input(run.agg.share_delivery(d), np.zeros(M + 1))
    with pytest.raises(ValueError, match="finite"):
        run.by_id[d].masked_input(run.agg.share_delivery(d), np.array([0.5, np.nan, 0.5]))
    assert run.by_id[d].phase is Phase.SHARED
    run.mask()
    assert run.by_id[d].phase is Phase.MASKED


def test_consistency_check_refusals(federation):
    run = Manual(federation, n=4, n_min=3)
    run.advertise()
    run.share()
    run.mask()
    d = run.ids[0]
    cfg_participants = tuple(run.ids)
    without_me = SurvivorSet(1, run.agg.digest, to_bitmap(run.ids[1:], cfg_participants)).encode()
    with pytest.raises(ProtocolError, match="omits this device"):
        run.by_id[d].consistency_check(without_me)
    with pytest.raises(SecAggAbort, match="n_min=3"):
        run.by_id[d].consistency_check(
            SurvivorSet(1, run.agg.digest, to_bitmap(run.ids[:2], cfg_participants)).encode())
    with pytest.raises(MessageRejected):
        run.by_id[d].consistency_check(SurvivorSet(2, run.agg.digest, to_bitmap(run.ids, cfg_participants)).encode())
    exactly = SurvivorSet(1, run.agg.digest, to_bitmap(run.ids[:3], cfg_participants)).encode()
    ack = run.by_id[d].consistency_check(exactly)                 # n_min survivors: accepted
    assert run.by_id[d].consistency_check(exactly) == ack         # asked again: the same signed answer
    with pytest.raises(RefusedUnmask):
        run.by_id[d].consistency_check(run.agg.survivor_set())


def test_unmask_reveals_b_for_survivors_and_s_for_dropouts(federation):
    run = Manual(federation, n=4, n_min=3)
    run.advertise()
    run.share()
    run.mask(who=run.ids[:3])                                     # the last device dropped after ShareKeys
    run.ack()
    d = run.ids[0]
    response = UnmaskShares.decode(run.by_id[d].unmask(run.agg.ack_set(d)), run.coordinator.directory)
    assert {v for v, _ in response.b_shares} == set(run.ids[:3])
    assert {v for v, _ in response.s_shares} == {run.ids[3]}
    cached = run.by_id[d].unmask(RelayedFrames(KIND_ACK_SET, 1, run.agg.digest, ()).encode())
    assert run.by_id[d].unmask(run.agg.ack_set(d)) == cached


def test_unmask_needs_t_confirmations_of_the_same_survivor_set(federation):
    run = Manual(federation, n=4, n_min=3)                          # threshold 3, certificate 3
    run.advertise()
    run.share()
    run.mask()
    run.ack(who=run.ids[:2])
    d = run.ids[0]
    # itself and one neighbour: 2 < 3
    with pytest.raises(SecAggAbort, match="only 2 devices certified"):
        run.by_id[d].unmask(run.agg.ack_set(d))
    assert run.by_id[d].phase is Phase.ACKED
    # another device's acknowledgement of a different set does not count
    other = run.by_id[run.ids[2]]
    odd = other.consistency_check(SurvivorSet(1, run.agg.digest, to_bitmap(run.ids[1:], tuple(run.ids))).encode())
    genuine = RelayedFrames.decode(run.agg.ack_set(d), KIND_ACK_SET).frames
    with pytest.raises(ProtocolError, match="different survivor set"):
        run.by_id[d].unmask(RelayedFrames(KIND_ACK_SET, 1, run.agg.digest, genuine + (odd,)).encode())


# -- the aggregator's own checks ---------------------------------------------------------------------------------
def test_aggregator_phases_and_membership(federation):
    run = Manual(federation, n=4, n_min=3)
    d = run.ids[0]
    advert = run.by_id[d].start_round(run.start.config, run.start.envelopes[d])
    run.agg.receive_advertise(advert)
    with pytest.raises(MessageRejected, match="duplicate"):
        run.agg.receive_advertise(advert)
    with pytest.raises(SecAggAbort, match="cannot close phase share"):
        run.agg.close_shares()
    with pytest.raises(SecAggAbort, match="only 1 devices advertised keys"):
        run.agg.close_advertise()                                  # 1 < n_min: the round is over
    assert run.agg.phase == "aborted"
    with pytest.raises(SecAggAbort, match="cannot unmask"):
        run.agg.finish()


def test_aggregator_takes_shares_only_from_advertisers_with_one_share_per_neighbour(federation):
    run = Manual(federation, n=4, n_min=3)
    run.advertise(who=run.ids[:3])                                 # the fourth never advertised
    late = run.clients[3].start_round(run.start.config, run.start.envelopes[run.ids[3]])
    with pytest.raises(MessageRejected, match="arrived in phase share"):
        run.agg.receive_advertise(late)
    shares = [run.by_id[d].share_keys(run.agg.key_broadcast(d)) for d in run.ids[:3]]
    for s in shares:
        run.agg.receive_shares(s)
    run.agg.close_shares()
    assert run.agg.phase == "input"
    # each device's ShareDelivery carries exactly the shares its live neighbours made for it
    delivery = ShareDelivery.decode(run.agg.share_delivery(run.ids[0]))
    assert delivery.recipient == run.ids[0] and [v for v, _ in delivery.shares] == run.ids[1:3]


def test_aggregate_of_a_round_driven_by_hand(federation):
    run = Manual(federation, n=4, n_min=3)
    run.advertise()
    run.share()
    values = [np.array([0.5, 0.25, 1.0]), np.array([0.5, 0.5, 0.0]), np.array([0.25, 0.0, 0.0]),
              np.array([1.0, 1.0, 1.0])]
    run.mask(who=run.ids[:3], values=values)                       # device 4 dropped after ShareKeys
    run.ack()
    run.unmask()
    verified = run.coordinator.verify(run.agg.finish())
    assert verified.survivors == tuple(run.ids[:3])
    np.testing.assert_array_equal(verified.sum, [1.25, 0.75, 1.0])
    np.testing.assert_array_equal(verified.sq_sum, [0.5625, 0.3125, 1.0])
    assert run.agg.phase == "done"
