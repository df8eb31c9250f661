package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.pategail.core.secagg.Messages;
import org.pategail.core.secagg.SecAggClient;
import org.pategail.core.secagg.SecAggException;

/**
 * The device-side checks against a malicious aggregator or coordinator, one by one, on rounds among Java
 * clients ({@link SecAggRound}): the secure threshold floor, the committed checksum key, no masking with too
 * few shares, and a survivor set certified by a majority of the participants before any share is revealed.
 */
class SecAggClientTest {
    static SecAggException refused(SecAggException.Kind kind, String text, Executable call) {
        SecAggException e = assertThrows(SecAggException.class, call);
        assertEquals(kind, e.kind(), e.getMessage());
        assertTrue(e.getMessage().contains(text), e.getMessage());
        return e;
    }

    static Set<Long> set(long... ids) {
        Set<Long> out = new TreeSet<>();
        for (long d : ids) {
            out.add(d);
        }
        return out;
    }

    @Test
    void aThresholdBelowTheSecureThresholdIsRefused() throws Exception {
        // all pairs, 5 participants, 1 colluder: floor((5 + 1) / 2) + 1 = 4 (a strict majority of 5 is 3)
        SecAggRound low = new SecAggRound(1, SecAggRound.ids(5), 4, 3, 3, 0, 1);
        SecAggClient c = low.clients.get(10L);
        refused(SecAggException.Kind.PROTOCOL, "Shamir threshold 3 is below this device's floor 4 for 5 share "
                + "holders and 1 colluders", () -> c.startRound(low.signedConfig(), low.envelope(10)));
        assertEquals(SecAggClient.Phase.IDLE, c.phase());
        SecAggRound ok = new SecAggRound(1, SecAggRound.ids(5), 4, 3, 4, 0, 1);
        ok.clients.get(10L).startRound(ok.signedConfig(), ok.envelope(10));
        // SecAgg+ ring of degree 2 among 7: k/2 + 2 = 3, every holder (a strict majority of 3 would be 2)
        SecAggRound ring = new SecAggRound(2, SecAggRound.ids(7), 4, 4, 2, 2, 0);
        refused(SecAggException.Kind.PROTOCOL, "below this device's floor 3",
                () -> ring.clients.get(13L).startRound(ring.signedConfig(), ring.envelope(13)));
    }

    @Test
    void anEnvelopeWithAnotherChecksumKeyIsRejected() throws Exception {
        SecAggRound r = new SecAggRound(1, SecAggRound.ids(3), 4, 2, 2, 0, 0);
        SecAggClient c = r.clients.get(13L);
        byte[] other = r.checksumKey.clone();
        other[0] ^= 1;
        refused(SecAggException.Kind.MESSAGE_REJECTED, "not the one the round configuration commits to",
                () -> c.startRound(r.signedConfig(), r.envelope(13, other)));
        assertEquals(SecAggClient.Phase.IDLE, c.phase());
        c.startRound(r.signedConfig(), r.envelope(13));          // the committed key: the round goes on
        assertEquals(SecAggClient.Phase.ADVERTISED, c.phase());
    }

    @Test
    void tooFewSharesAbortBeforeMasking() throws Exception {
        // all pairs among 5: t = 3, so a device masks only with the shares of at least 2 neighbours
        SecAggRound r = new SecAggRound(1, SecAggRound.ids(5), 6, 3, 3, 0, 0);
        r.advertise();
        r.share();
        SecAggClient c = r.clients.get(10L);
        refused(SecAggException.Kind.ABORT, "shares from only 0 neighbours arrived; 2 are needed",
                () -> c.maskedInput(r.delivery(10, set()), r.scores(10)));
        refused(SecAggException.Kind.ABORT, "shares from only 1 neighbours arrived",
                () -> c.maskedInput(r.delivery(10, set(13)), r.scores(10)));
        assertEquals(SecAggClient.Phase.SHARED, c.phase());        // nothing sent, nothing changed
        byte[] masked = c.maskedInput(r.delivery(10, set(13, 16)), r.scores(10));
        assertEquals(10, Messages.MaskedInput.decode(masked, r.directory).sender);
    }

    /** A SecAgg+ round of 7 at degree 2 (t = 3, every holder; certificate: 4 signers) up to the acks. */
    static SecAggRound acknowledged() throws Exception {
        SecAggRound r = new SecAggRound(1, SecAggRound.ids(7), 5, 4, 3, 2, 0);
        assertEquals(4, r.config.certificateSize());
        r.advertise();
        r.share();
        r.input();
        r.acknowledge();
        return r;
    }

    /** The neighbours of device {@code me}. */
    static long[] neighbours(SecAggRound r, long me) {
        return r.neighbours(me).stream().mapToLong(Long::longValue).toArray();
    }

    /** The participants that are neither {@code me} nor one of its neighbours. */
    static long[] farFrom(SecAggRound r, long me) {
        Set<Long> near = new HashSet<>(r.neighbours(me));
        near.add(me);
        return r.others(near);
    }

    @Test
    void unmaskNeedsACertificateOfAMajorityOfTheParticipants() throws Exception {
        SecAggRound r = acknowledged();
        long me = 10;
        long[] nb = neighbours(r, me);
        long[] far = farFrom(r, me);
        SecAggClient c = r.clients.get(me);
        // both neighbours confirmed (t = 3 with this device), but 3 signers are no majority of 7
        refused(SecAggException.Kind.ABORT, "only 3 devices certified the survivor set; 4 of the round's "
                + "participants are needed", () -> c.unmask(r.ackSet(nb[0], nb[1])));
        assertEquals(SecAggClient.Phase.ACKED, c.phase());
        // 4 signers, but only one of them a holder of this device's shares: t = 3 holders needed
        refused(SecAggException.Kind.ABORT, "only 1 neighbours confirmed the survivor set; 3 needed",
                () -> c.unmask(r.ackSet(far[0], far[1], far[2])));
        refused(SecAggException.Kind.ABORT, "only 2 neighbours confirmed",
                () -> c.unmask(r.ackSet(nb[0], far[0], far[1], far[2])));
        // neighbours first, then another participant's acknowledgement (it counts toward the certificate)
        byte[] reply = c.unmask(r.ackSet(nb[0], nb[1], far[0]));
        assertNotNull(Messages.UnmaskShares.decode(reply, r.directory));
        assertEquals(SecAggClient.Phase.DONE, c.phase());
    }

    @Test
    void unmaskCountsEverySignerOnce() throws Exception {
        SecAggRound r = acknowledged();
        long me = 10;
        long[] nb = neighbours(r, me);
        long[] far = farFrom(r, me);
        SecAggClient c = r.clients.get(me);
        refused(SecAggException.Kind.PROTOCOL, "two acknowledgements from device " + nb[0],
                () -> c.unmask(r.ackSet(nb[0], nb[0], nb[1], far[0])));
        // this device's own acknowledgement, relayed back to it, is no second signer either
        refused(SecAggException.Kind.PROTOCOL, "two acknowledgements from device " + me,
                () -> c.unmask(r.ackSet(me, nb[0], nb[1])));
        assertEquals(SecAggClient.Phase.ACKED, c.phase());
        c.unmask(r.ackSet(nb[0], nb[1], far[0]));
    }

    @Test
    void unmaskRefusesAcknowledgementsOfOtherSurvivorSets() throws Exception {
        SecAggRound r = acknowledged();
        long me = 10;
        long[] nb = neighbours(r, me);
        long[] far = farFrom(r, me);
        SecAggClient c = r.clients.get(me);
        // another view of the round: one participant's signature on a survivor set without far[3]
        Set<Long> split = new TreeSet<>(r.inputs.keySet());
        split.remove(far[3]);
        byte[] splitAck = r.signedAck(far[0], split);
        byte[] set = new Messages.AckSet(r.config.roundId, r.digest, Arrays.asList(r.acks.get(nb[0]),
                r.acks.get(nb[1]), splitAck)).encode();
        refused(SecAggException.Kind.PROTOCOL, "device " + far[0] + " saw a different survivor set",
                () -> c.unmask(set));
        c.unmask(r.ackSet(nb[0], nb[1], far[1]));
    }

    @Test
    void unmaskRefusesAnAcknowledgementFromANonSurvivor() throws Exception {
        // device 28 advertised and shared, but its masked input never reached the sum
        SecAggRound r = new SecAggRound(1, SecAggRound.ids(7), 5, 4, 3, 2, 0);
        r.advertise();
        r.share();
        r.input();
        r.inputs.remove(28L);
        r.acknowledge();
        long me = 10;
        while (me == 28 || r.neighbours(me).contains(28L)) {
            me += 3;
        }
        SecAggClient c = r.clients.get(me);
        Set<Long> u3 = r.inputs.keySet();
        byte[] ghost = r.signedAck(28, u3);
        long[] nb = neighbours(r, me);
        byte[] set = new Messages.AckSet(r.config.roundId, r.digest, Arrays.asList(ghost, r.acks.get(nb[0]),
                r.acks.get(nb[1]))).encode();
        refused(SecAggException.Kind.PROTOCOL, "acknowledgement from device 28, which is not a survivor",
                () -> c.unmask(set));
    }
}
