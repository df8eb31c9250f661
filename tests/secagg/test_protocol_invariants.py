"""The protocol's checks one by one: each test fails when its check is taken out (whose acknowledgements count
and how often, the certificate, the share floor, the checksum key's commitment, low-order keys, the direction of
pairwise keys, what counts as a release after unmasking)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from pategail.sdk.secagg import COORDINATOR, MessageRejected, ProtocolError, SecAggAbort, TamperDetected, crypto
from pategail.sdk.secagg.checksum import key_commitment
from pategail.sdk.secagg.config import DevicePublicKeys, RoundConfig
from pategail.sdk.secagg.errors import AbortAfterUnmask
from pategail.sdk.secagg.messages import (KIND_ACK_SET, AdvertiseKeys, AggregateResult, RelayedFrames, ShareDelivery,
                                          to_bitmap)
from pategail.server.checkpoint import read_intents
from pategail.server.config import TrainConfig
from pategail.server.privacy.plan import ReleaseNoise
from pategail.server.releases import SecureReleases
from pategail.server.secagg.round import Dropouts, SecureRoundConfig, run_secure_round

from .malicious import MaliciousAggregator
from .test_secagg_client_checks import Manual

LOW_ORDER = bytes(32)                                  # the all-zero point: every exchange with it fails


def _acked(federation, rng, n=12, degree=4):
    agg = MaliciousAggregator(federation, n, degree, n // 2, rng)
    agg.deliver()
    agg.show(lambda d: agg.inputs.keys())
    return agg


def _unmask_with(agg, d, senders):
    frames = tuple(agg.acks[v][1] for v in senders)
    return agg.clients[d].unmask(RelayedFrames(KIND_ACK_SET, 1, agg.digest, frames).encode())


# -- whose acknowledgements count, and how often -------------------------------------------------------------------
def test_neighbours_alone_do_not_make_a_certificate(federation, rng):
    agg = _acked(federation, rng)                                  # 12 devices, k = 4: t = 4, certificate 7
    d = agg.ids[0]
    assert (agg.cfg.threshold, agg.cfg.certificate_size) == (4, 7)
    with pytest.raises(SecAggAbort, match="only 5 devices certified"):
        _unmask_with(agg, d, sorted(agg.neighbours(d)))


def test_a_certificate_without_enough_neighbours_is_refused(federation, rng):
    agg = _acked(federation, rng)
    d = agg.ids[0]
    others = sorted(set(agg.ids) - agg.neighbours(d) - {d})        # 7 signers, no neighbour among them
    with pytest.raises(SecAggAbort, match="only 1 neighbours confirmed"):
        _unmask_with(agg, d, others)
    nb = sorted(agg.neighbours(d))
    _unmask_with(agg, d, nb[:3] + others[:3])                      # 3 neighbours + itself = t; 7 signers: enough


def test_a_repeated_acknowledgement_counts_once(federation, rng):
    agg = _acked(federation, rng)
    d = agg.ids[0]
    nb = sorted(agg.neighbours(d))
    with pytest.raises(ProtocolError, match="two acknowledgements"):
        _unmask_with(agg, d, nb[:1] * 6 + nb)
    with pytest.raises(ProtocolError, match="two acknowledgements"):
        _unmask_with(agg, d, [d] + sorted(set(agg.ids) - {d}))     # its own ack is already counted


def test_an_acknowledgement_from_outside_the_survivor_set_does_not_count(federation, rng):
    agg = MaliciousAggregator(federation, 12, 4, 6, rng)
    agg.deliver()
    everyone = set(agg.inputs)
    outsider = agg.ids[-1]
    # the outsider is shown the full set and signs it; everyone else is shown the set without it
    agg.show(lambda v: everyone if v == outsider else everyone - {outsider})
    d = next(v for v in agg.ids if v != outsider and outsider not in agg.neighbours(v))
    others = sorted(everyone - {outsider, d})
    forged = RelayedFrames(KIND_ACK_SET, 1, agg.digest, (agg.acks[outsider][1],) + tuple(agg.acks[v][1] for v in others))
    with pytest.raises(ProtocolError, match="not a survivor"):
        agg.clients[d].unmask(forged.encode())


# -- the share floor, checked at its edge ---------------------------------------------------------------------------
def test_a_delivery_with_the_same_sender_twice_is_refused(federation, rng):
    agg = MaliciousAggregator(federation, 10, 0, 6, rng)
    d, v = agg.ids[0], agg.ids[1]
    pairs = tuple((u, agg.shares[u][d]) for u in sorted(agg.neighbours(d))) + ((v, agg.shares[v][d]),)
    with pytest.raises(MessageRejected, match="duplicate"):          # the wire decoder refuses it
        agg.clients[d].masked_input(ShareDelivery(1, agg.digest, d, pairs).encode(), agg.values[d])


def test_a_share_sent_back_to_its_sender_is_refused(federation, rng):
    """Direction binding: the share u sent to v, delivered back to u as if v had sent it."""
    agg = MaliciousAggregator(federation, 6, 0, 4, rng)
    u, v = agg.ids[0], agg.ids[1]
    pairs = tuple((w, agg.shares[w][u]) for w in sorted(agg.neighbours(u)) if w != v) + ((v, agg.shares[u][v]),)
    with pytest.raises(MessageRejected):
        agg.clients[u].masked_input(ShareDelivery(1, agg.digest, u, pairs).encode(), agg.values[u])


def test_pairwise_keys_are_bound_to_direction_and_pair():
    a, b = X25519PrivateKey.generate(), X25519PrivateKey.generate()
    secret = crypto.agree(a, crypto.public_bytes(b))
    digest = bytes(range(32))
    assert crypto.share_key(secret, digest, 1, 2) != crypto.share_key(secret, digest, 2, 1)
    assert crypto.share_key(secret, digest, 1, 2) != crypto.share_key(secret, bytes(32), 1, 2)
    ab = crypto.mask_seed(a, crypto.public_bytes(b), digest, 1, 2)
    assert ab == crypto.mask_seed(b, crypto.public_bytes(a), digest, 2, 1)      # both ends derive the same mask
    assert ab != crypto.mask_seed(a, crypto.public_bytes(b), digest, 1, 3)
    assert ab != crypto.mask_seed(a, crypto.public_bytes(b), bytes(32), 1, 2)


# -- the checksum key is one key for the whole round --------------------------------------------------------------
def test_a_device_handed_another_checksum_key_refuses(federation, monkeypatch):
    """A coordinator that seals one device a key of its own: the device's opened key does not match the signed
    commitment, so it sends nothing."""
    from pategail.server.secagg import coordinator as coordinator_module

    real = coordinator_module.seal_envelope

    def seal(ephemeral, public, round_id, digest, device, key, offset):
        if device == 100:
            key = bytes(32)
        return real(ephemeral, public, round_id, digest, device, key, offset)

    monkeypatch.setattr(coordinator_module, "seal_envelope", seal)
    run = Manual(federation)
    with pytest.raises(MessageRejected, match="commits to"):
        run.by_id[100].start_round(run.start.config, run.start.envelopes[100])
    run.by_id[101].start_round(run.start.config, run.start.envelopes[101])  # the others' keys match
    cfg = RoundConfig.from_signed_bytes(run.start.config, run.coordinator.directory.coordinator)
    assert cfg.checksum_commitment != bytes(32) and cfg.checksum_commitment != key_commitment(bytes(32))


# -- low-order keys stop at the door ------------------------------------------------------------------------------
def test_low_order_keys_are_refused_at_enrolment_and_in_adverts(federation):
    run = Manual(federation)
    with pytest.raises(ValueError, match="envelope key refused"):
        run.coordinator.enroll(7, DevicePublicKeys(bytes(32), LOW_ORDER))
    d = run.ids[0]
    advert = AdvertiseKeys.decode(run.by_id[d].start_round(run.start.config, run.start.envelopes[d]),
                                  run.coordinator.directory)
    bad = replace(advert, s_public=LOW_ORDER).encode(run.by_id[d]._identity.sign)
    with pytest.raises(MessageRejected, match="X25519"):
        run.agg.receive_advertise(bad)
    run.agg.receive_advertise(advert.encode(run.by_id[d]._identity.sign))   # the genuine one still goes in


def test_enrolment_frames_with_a_low_order_envelope_key_are_rejected():
    from pategail.sdk.net.frames import Enrolment
    from pategail.sdk.secagg.crypto import DeviceIdentity

    ident = DeviceIdentity.generate()
    good = Enrolment(DevicePublicKeys(ident.signing_public, ident.envelope_public)).to_bytes(ident.sign)
    assert Enrolment.from_bytes(good).keys.envelope == ident.envelope_public
    bad = Enrolment(DevicePublicKeys(ident.signing_public, LOW_ORDER)).to_bytes(ident.sign)
    with pytest.raises(MessageRejected, match="X25519"):
        Enrolment.from_bytes(bad)


# -- the coordinator's side: the same certificate, and what counts after unmasking -----------------------------------
def _shrink_acks(keep):
    def adversary(phase, agg, replies):
        if phase == "aggregate":
            msg = AggregateResult.decode(replies[COORDINATOR])
            return AggregateResult(msg.round_id, msg.config_digest, msg.survivors_bitmap, msg.sums, msg.checksum,
                                   msg.acks[:keep]).encode()
    return adversary


def test_the_coordinator_wants_the_certificate_not_t_signatures(federation, rng):
    coordinator, clients, _ = federation(12)
    config = SecureRoundConfig(round_id=2, n_min=6, degree=4, sum_noise_scale=0.01, sq_sum_noise_scale=0.01)
    with pytest.raises(TamperDetected, match="only 6 survivors signed"):       # t = 4 < 6 < certificate 7
        run_secure_round(clients, rng.random((12, 3)), config, rng, coordinator=coordinator, adversary=_shrink_acks(6))


def test_an_unmasked_aggregate_below_n_min_is_tampering_not_an_abort(federation, rng):
    coordinator, clients, _ = federation(8)

    def adversary(phase, agg, replies):
        if phase == "aggregate":
            msg = AggregateResult.decode(replies[COORDINATOR])
            few = to_bitmap(sorted(agg.inputs)[:3], agg.config.participants)
            return AggregateResult(msg.round_id, msg.config_digest, few, msg.sums, msg.checksum, msg.acks).encode()

    config = SecureRoundConfig(round_id=2, n_min=6, sum_noise_scale=0.01, sq_sum_noise_scale=0.01,
                               aggregator="device")
    with pytest.raises(TamperDetected, match="below n_min=6"):
        run_secure_round(clients, rng.random((8, 3)), config, rng, coordinator=coordinator, adversary=adversary)


class _Fleet:
    """Real SDK secure-aggregation clients with fixed scores, the aggregator misbehaving after the unmasking."""

    def __init__(self, federation, n, adversary, dropouts=None):
        self.coordinator_keys, self.clients, _ = federation(n)
        self.device_ids = tuple(c.device_id for c in self.clients)
        self.adversary, self.dropouts = adversary, dropouts

    def public_keys(self):
        return dict(self.coordinator_keys.directory.devices)

    def secure_sum(self, participants, config, coordinator, rng, num_queries):
        for c in self.clients:          # enrolled with the releases' coordinator, as a real fleet's devices are
            c._directory = coordinator.directory
        values = np.full((len(self.clients), num_queries), 0.5)
        return run_secure_round(self.clients, values, config, rng, coordinator=coordinator, adversary=self.adversary,
                                dropouts=self.dropouts)


def _drop_unmask_shares(phase, agg, replies):
    """A device aggregator that, once shares are in, claims too few arrived to unmask."""
    if phase == "unmask":
        agg.unmasks.clear()
        agg.unmasks.update({d: None for d in list(replies)[:1]})


@pytest.mark.parametrize("attack, error", [("below_n_min", TamperDetected), ("lost_shares", AbortAfterUnmask)])
def test_a_release_unmasked_by_a_device_aggregator_counts(federation, tmp_path, attack, error):
    def below_n_min(phase, agg, replies):
        if phase == "aggregate":
            msg = AggregateResult.decode(replies[COORDINATOR])
            few = to_bitmap(sorted(agg.inputs)[:2], agg.config.participants)
            return AggregateResult(msg.round_id, msg.config_digest, few, msg.sums, msg.checksum, msg.acks).encode()

    def lost_shares(phase, agg, replies):
        if phase == "unmask":
            first = sorted(agg.unmasks)[0]
            kept = agg.unmasks[first]
            agg.unmasks.clear()
            agg.unmasks[first] = kept             # one holder's shares: below every threshold

    fleet = _Fleet(federation, 8, {"below_n_min": below_n_min, "lost_shares": lost_shares}[attack])
    config = TrainConfig(secagg={"aggregator": "device", "min_survivors": 0.75}).for_devices(8)
    releases = SecureReleases(config, fleet, tmp_path, seed=0)
    noise = ReleaseNoise(sum_scale=0.05, sq_sum_scale=0.05)
    with pytest.raises(error):
        releases.release(3, "rewards", list(fleet.device_ids), 4, noise)
    assert [i["round"] for i in read_intents(tmp_path)] == [3]          # still counted: not marked aborted
    releases.rebuild_accountant()
    assert releases.accountant.epsilon() > 0


def test_a_round_that_ends_before_unmasking_is_not_counted(federation, tmp_path):
    fleet = _Fleet(federation, 8, None)
    fleet.dropouts = Dropouts(after_share_keys=frozenset(fleet.device_ids[:4]))   # half stop before their input
    config = TrainConfig(secagg={"aggregator": "device", "min_survivors": 0.75}).for_devices(8)
    releases = SecureReleases(config, fleet, tmp_path, seed=0)
    with pytest.raises(SecAggAbort) as err:
        releases.release(3, "rewards", list(fleet.device_ids), 4, ReleaseNoise(sum_scale=0.05, sq_sum_scale=0.05))
    assert not isinstance(err.value, AbortAfterUnmask)
    assert read_intents(tmp_path) == []


# -- malformed orders are typed refusals, never a crash of the caller's loop -----------------------------------------
def test_malformed_secure_aggregation_orders_are_typed_refusals(tmp_path, federation):
    from pategail.sdk.device import Device
    from pategail.sdk.secagg import SecAggError

    coordinator, _, _ = federation(2)
    device = Device(tmp_path / "dev", 100, rng=np.random.default_rng(0))
    rng = np.random.default_rng(5)
    orders = [("advertise", ()), ("advertise", (b"x",)), ("share", ()), ("share", (b"a", b"b")), ("input", ()),
              ("ack", ("not bytes",)), ("unmask", (None,)), ("bogus", (b"",)), ("advertise", (b"", b""))]
    for step in ("advertise", "share", "input", "ack", "unmask"):
        for size in (0, 3, 40, 300):
            frames = tuple(rng.bytes(size) for _ in range(2 if step == "advertise" else 1))
            orders.append((step, frames))
    for step, frames in orders:
        with pytest.raises(SecAggError):
            device.secagg_step(coordinator.directory, step, *frames)
