package org.pategail.core.secagg;

import java.io.IOException;
import java.math.BigInteger;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * One device's side of a secure-aggregation round, the same state machine as the Python SDK's
 * {@code SecAggClient} (Bonawitz et al. 2017, SecAgg+ graph optional). Each call takes the aggregator's bytes
 * and returns the reply's bytes; a call that throws leaves the state as it was.
 *
 * <pre>
 * startRound(signedConfig, envelope) -> AdvertiseKeys
 * shareKeys(keyBroadcast)            -> ShareKeys
 * maskedInput(shareDelivery, scores) -> MaskedInput   (slots: D, then D², then the checksum)
 * consistencyCheck(survivorSet)      -> SurvivorAck   (one survivor set per round)
 * unmask(ackSet)                     -> UnmaskShares  (only under a survivor set certified by a majority of
 *                                                      the participants; never both secrets of one device)
 * </pre>
 *
 * <p>What the checks add up to: an aggregator together with at most {@code colluders} devices opens no sum but
 * the one over all honest survivors of one survivor set. The argument is written out in the Python SDK's
 * {@code graph.secure_threshold}; {@link NeighbourGraph#secureThreshold} and
 * {@link NeighbourGraph#certificateSize} are the two bounds it needs.
 */
public final class SecAggClient {
    /** Where the client is in the round. */
    public enum Phase { IDLE, ADVERTISED, SHARED, MASKED, ACKED, DONE }

    private static final byte[] SURVIVORS_LABEL = "pategail-secagg-v2/survivors".getBytes(
            java.nio.charset.StandardCharsets.US_ASCII);

    private final long deviceId;
    private final DeviceIdentity identity;
    private final KeyDirectory directory;
    private final SecureRandom random;
    private final Noise noise;
    private final RoundLog roundLog;
    private Round round;
    private Phase phase = Phase.IDLE;

    /** The state of the current round. */
    private static final class Round {
        RoundConfig config;
        byte[] digest;      // RoundConfig.digest(): binds every message and key of the round
        Set<Long> neighbours;
        byte[] checksumKey;
        long checksumOffset; // k_u of the affine checksum: known to this device and the coordinator only
        byte[] cKey;
        byte[] sKey;
        byte[] bSeed;
        Map<Long, Messages.AdvertiseKeys> peers = new TreeMap<>();
        byte[][] ownShare;
        Map<Long, byte[]> cSecrets = new HashMap<>();
        Map<Long, byte[][]> held = new TreeMap<>();
        Set<Long> survivors = new TreeSet<>();
        byte[] ackBitmap;
        byte[] ack;
        byte[] response;
        Map<Long, Character> revealed = new HashMap<>();
        boolean environment;    // the upload is the environment vector (one vector query on the ledger)
        double envL1Bound;      // ... L1-clipped to this in a Laplace round
    }

    /** A client whose replay guard lives in memory only (tests, simulations). */
    private final DevicePolicy policy;
    private final PrivacyLedger ledger;

    public SecAggClient(long deviceId, DeviceIdentity identity, KeyDirectory directory, SecureRandom random) {
        this(deviceId, identity, directory, random, new RoundLog());
    }

    /** @param roundLog the last round accepted per coordinator key; persisted, it survives restarts */
    public SecAggClient(long deviceId, DeviceIdentity identity, KeyDirectory directory, SecureRandom random,
                        RoundLog roundLog) {
        this(deviceId, identity, directory, random, roundLog, DevicePolicy.NONE);
    }

    /** @param policy the floors of the privacy plan in force ({@link DevicePolicy#NONE}: the secure threshold only) */
    public SecAggClient(long deviceId, DeviceIdentity identity, KeyDirectory directory, SecureRandom random,
                        RoundLog roundLog, DevicePolicy policy) {
        this(deviceId, identity, directory, random, roundLog, policy, PrivacyLedger.inMemory());
    }

    /** @param ledger the device's privacy ledger with its budget: checked at the start of a round, and written
     *                before the masked input leaves */
    public SecAggClient(long deviceId, DeviceIdentity identity, KeyDirectory directory, SecureRandom random,
                        RoundLog roundLog, DevicePolicy policy, PrivacyLedger ledger) {
        this.policy = policy;
        this.ledger = ledger;
        this.roundLog = roundLog;
        this.deviceId = deviceId;
        this.identity = identity;
        this.directory = directory;
        this.random = random;
        this.noise = new Noise(random);
    }

    public long deviceId() {
        return deviceId;
    }

    public Phase phase() {
        return phase;
    }

    /** The verified configuration of the current (or last) round, or null before the first one. */
    public RoundConfig config() {
        return round == null ? null : round.config;
    }

    private Round expect(Phase p) throws SecAggException {
        if (phase != p || round == null) {
            throw SecAggException.protocol("device " + deviceId + ": expected phase " + p + ", in " + phase);
        }
        return round;
    }

    /** The message must belong to the current round and to its signed configuration (not merely its id). */
    private void checkRound(long roundId, byte[] configDigest) throws SecAggException {
        if (round == null || roundId != round.config.roundId) {
            throw SecAggException.rejected("message for round " + roundId + ", not the current one");
        }
        if (!java.util.Arrays.equals(configDigest, round.digest)) {
            throw SecAggException.rejected("message for another configuration of round " + roundId + " (replay?)");
        }
    }

    /** SHA-256 over the round configuration's digest and the U3 bitmap: what a device signs in the
     *  consistency check (the coordinator checks the same digest on the aggregate's bitmap). */
    public static byte[] survivorDigest(byte[] configDigest, byte[] bitmap) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            md.update(SURVIVORS_LABEL);
            md.update(configDigest);
            md.update(bitmap);
            return md.digest();
        } catch (NoSuchAlgorithmException err) {
            throw new IllegalStateException(err);
        }
    }

    private static byte[] shareHead(long roundId, long sender, long recipient) {
        return new Wire.Writer().u64(roundId).u32(sender).u32(recipient).bytes();
    }

    /** Verify the coordinator-signed config, open the checksum envelope, advertise fresh keys. */
    public byte[] startRound(byte[] signedConfig, byte[] envelope) throws SecAggException {
        return startRound(signedConfig, envelope, false, 9.0);
    }

    /** The same, for a round that would upload the device's environment vector when {@code environment} (of L1
     * bound {@code envL1Bound}), whose noise the policy checks against the plan's environment floor. */
    public byte[] startRound(byte[] signedConfig, byte[] envelope, boolean environment, double envL1Bound)
            throws SecAggException {
        return startRound(signedConfig, envelope, environment, envL1Bound, false);
    }

    /** The same; {@code cells}: the round would upload the device's visited vector (a cell-table release, held to
     * the plan's floor for that release). */
    public byte[] startRound(byte[] signedConfig, byte[] envelope, boolean environment, double envL1Bound,
                             boolean cells) throws SecAggException {
        RoundConfig cfg = RoundConfig.fromSignedBytes(signedConfig, directory.coordinator());
        roundLog.check(directory.coordinator(), cfg.roundId);
        if (!cfg.isParticipant(deviceId)) {
            throw SecAggException.protocol("device " + deviceId + " is not a participant of round " + cfg.roundId);
        }
        // a signature says who chose the configuration, not that it is safe: the secure threshold for this graph
        // and these colluders, and the declared privacy plan's floors
        policy.check(cfg, environment, envL1Bound, cells);
        ledger.check(cfg, environment, envL1Bound);
        Messages.ChecksumEnvelope env = Messages.ChecksumEnvelope.decode(envelope);
        if (env.roundId != cfg.roundId || env.device != deviceId) {
            throw SecAggException.rejected("checksum envelope for another round or device");
        }
        byte[] digest = cfg.digest();
        byte[] shared = Crypto.agree(identity.envelopePrivate(), cfg.envelopePublic);
        Object[] secrets = Checksum.unpackSecrets(Crypto.openSealed(Checksum.envelopeKey(shared, digest, deviceId),
                env.sealed, Checksum.envelopeAad(digest, deviceId)));
        // one checksum key for every device of the round: the one the signed configuration commits to
        // (MessageDigest.isEqual compares in constant time)
        if (!MessageDigest.isEqual(Checksum.keyCommitment((byte[]) secrets[0]), cfg.checksumCommitment)) {
            throw SecAggException.rejected("the checksum key in the envelope is not the one the round "
                    + "configuration commits to");
        }
        Round r = new Round();
        r.config = cfg;
        r.digest = digest;
        r.environment = environment;
        r.envL1Bound = envL1Bound;
        r.checksumOffset = (Long) secrets[1];
        r.neighbours = new NeighbourGraph(cfg.participants, cfg.roundSeed, cfg.degree).neighbours(deviceId);
        r.checksumKey = (byte[]) secrets[0];
        r.cKey = Crypto.randomKey(random);
        r.sKey = Crypto.randomKey(random);
        r.bSeed = Crypto.randomKey(random);
        byte[] reply = new Messages.AdvertiseKeys(cfg.roundId, digest, deviceId, Crypto.x25519Public(r.cKey),
                Crypto.x25519Public(r.sKey)).encode(identity::sign);
        roundLog.accept(directory.coordinator(), cfg.roundId);    // on disk before anything is sent
        round = r;
        phase = Phase.ADVERTISED;
        return reply;
    }

    /** Check the neighbours' signed keys; send each an encrypted share of b_u and of s_u's secret key. */
    public byte[] shareKeys(byte[] keyBroadcast) throws SecAggException {
        Round r = expect(Phase.ADVERTISED);
        Messages.KeyBroadcast kb = Messages.KeyBroadcast.decode(keyBroadcast);
        checkRound(kb.roundId, kb.configDigest);
        Map<Long, Messages.AdvertiseKeys> peers = new TreeMap<>();
        for (byte[] raw : kb.adverts) {
            Messages.AdvertiseKeys adv = Messages.AdvertiseKeys.decode(raw, directory);
            checkRound(adv.roundId, adv.configDigest);
            if (!r.neighbours.contains(adv.sender) || peers.containsKey(adv.sender)) {
                throw SecAggException.protocol("unexpected or repeated keys of device " + adv.sender);
            }
            peers.put(adv.sender, adv);
        }
        RoundConfig cfg = r.config;
        if (peers.size() + 1 < cfg.threshold) {
            throw SecAggException.abort("only " + peers.size() + " neighbours advertised keys; the threshold is "
                    + cfg.threshold);
        }
        List<Long> holders = new ArrayList<>(peers.keySet());
        holders.add(deviceId);
        java.util.Collections.sort(holders);
        int[] xs = new int[holders.size()];
        for (int i = 0; i < xs.length; i++) {
            xs[i] = cfg.shareX(holders.get(i));
        }
        BigInteger[] bYs = Shamir.split(r.bSeed, xs, cfg.threshold, random);
        BigInteger[] sYs = Shamir.split(r.sKey, xs, cfg.threshold, random);
        Map<Long, byte[]> cSecrets = new HashMap<>();
        byte[][] own = null;
        List<Messages.Entry> shares = new ArrayList<>();
        for (int i = 0; i < xs.length; i++) {
            long v = holders.get(i);
            byte[] by = Shamir.yToBytes(bYs[i]), sy = Shamir.yToBytes(sYs[i]);
            if (v == deviceId) {             // a device holds a share of its own secrets too
                own = new byte[][]{by, sy};
                continue;
            }
            byte[] head = shareHead(cfg.roundId, deviceId, v);
            byte[] secret = Crypto.agree(r.cKey, peers.get(v).cPublic);
            cSecrets.put(v, secret);
            byte[] key = Crypto.shareKey(secret, r.digest, deviceId, v);
            shares.add(new Messages.Entry(v, Crypto.seal(key, Bytes.concat(head, by, sy), head, random)));
        }
        r.ownShare = own;
        r.cSecrets = cSecrets;
        r.peers = peers;
        phase = Phase.SHARED;
        return new Messages.ShareKeys(cfg.roundId, r.digest, deviceId, shares).encode(identity::sign);
    }

    /** Decrypt the shares held for neighbours; upload y = x + noise + PRG(b_u) ± Σ PRG(s_uv). */
    public byte[] maskedInput(byte[] shareDelivery, double[] scores) throws SecAggException {
        Round r = expect(Phase.SHARED);
        RoundConfig cfg = r.config;
        Messages.ShareDelivery sd = Messages.ShareDelivery.decode(shareDelivery);
        checkRound(sd.roundId, sd.configDigest);
        if (sd.recipient != deviceId) {
            throw SecAggException.rejected("share delivery addressed to another device");
        }
        Map<Long, byte[][]> held = new TreeMap<>();
        for (Messages.Entry e : sd.shares) {
            long v = e.device;
            if (!r.peers.containsKey(v)) {
                throw SecAggException.protocol("shares from device " + v
                        + ", which is not a neighbour that advertised keys");
            }
            byte[] head = shareHead(cfg.roundId, v, deviceId);
            byte[] plain = Crypto.openSealed(Crypto.shareKey(r.cSecrets.get(v), r.digest, v, deviceId), e.data, head);
            if (plain.length != head.length + 2 * Shamir.SHARE_BYTES
                    || !java.util.Arrays.equals(java.util.Arrays.copyOfRange(plain, 0, head.length), head)) {
                throw SecAggException.rejected("malformed share from device " + v);
            }
            held.put(v, new byte[][]{
                    java.util.Arrays.copyOfRange(plain, head.length, head.length + Shamir.SHARE_BYTES),
                    java.util.Arrays.copyOfRange(plain, head.length + Shamir.SHARE_BYTES, plain.length)});
        }
        held.put(deviceId, r.ownShare);
        if (held.size() < cfg.threshold) {
            // masked with fewer than t - 1 neighbours, the input could be opened with the self-mask secret
            // alone, which the other neighbours would reveal; Bonawitz et al. abort here too
            throw SecAggException.abort("shares from only " + (held.size() - 1) + " neighbours arrived; "
                    + (cfg.threshold - 1) + " are needed before this device masks its input");
        }
        int m = cfg.numQueries;
        int length = UploadInput.inputLength(cfg, scores.length);
        if (scores.length != length) {
            throw new IllegalArgumentException("scores must have shape (" + length + ",), got (" + scores.length
                    + ",)");
        }
        long[] x = new long[2 * m];
        if (cfg.isGaussian()) {             // slots m..2m-1 stay zero: no Σ D² in this mechanism
            long[] d = FixedPoint.encodeSigned(UploadInput.gaussianInput(scores, cfg));
            long[] n1 = noise.share(cfg.mechanism, cfg.sumNoiseScale * FixedPoint.SCALE, cfg.noiseDivisor(), m);
            for (int i = 0; i < m; i++) {
                x[i] = d[i] + n1[i];
            }
        } else {
            double[] clipped = r.environment ? UploadInput.laplaceEnvironmentInput(scores, r.envL1Bound)
                    : FixedPoint.clipUnit(scores);
            double[] squares = new double[m];
            for (int i = 0; i < m; i++) {
                squares[i] = clipped[i] * clipped[i];
            }
            long[] d = FixedPoint.encode(clipped), d2 = FixedPoint.encode(squares);
            long[] n1 = noise.share(cfg.mechanism, cfg.sumNoiseScale * FixedPoint.SCALE, cfg.noiseDivisor(), m);
            long[] n2 = noise.share(cfg.mechanism, cfg.sqSumNoiseScale * FixedPoint.SCALE, cfg.noiseDivisor(), m);
            for (int i = 0; i < m; i++) {
                x[i] = d[i] + n1[i];
                x[m + i] = d2[i] + n2[i];
            }
        }
        long[] y = new long[2 * m + 1];
        System.arraycopy(x, 0, y, 0, 2 * m);        // two's complement: the int64 bits are the Z_2^64 element
        y[2 * m] = Checksum.checksum(x, Checksum.weights(r.checksumKey, 2 * m), r.checksumOffset);
        Prg.addMask(y, Prg.expandMask(r.bSeed, 2 * m), +1);
        for (long v : r.peers.keySet()) {
            if (!held.containsKey(v)) {
                continue;
            }
            byte[] seed = Crypto.maskSeed(r.sKey, r.peers.get(v).sPublic, r.digest, deviceId, v);
            Prg.addMask(y, Prg.expandMask(seed, 2 * m), deviceId < v ? +1 : -1);
        }
        byte[] reply = new Messages.MaskedInput(cfg.roundId, r.digest, deviceId, y).encode(identity::sign);
        try {       // from the moment the input leaves, a release containing it may exist
            ledger.record(cfg, r.environment, r.envL1Bound);
        } catch (IOException err) {
            throw SecAggException.abort("cannot write the privacy ledger: " + err.getMessage());
        }
        r.held = held;
        phase = Phase.MASKED;
        return reply;
    }

    /** Sign the survivor set U3, once per round; refuse below n_min or when U3 is inconsistent. */
    public byte[] consistencyCheck(byte[] survivorSet) throws SecAggException {
        if (phase == Phase.ACKED || phase == Phase.DONE) {
            Messages.SurvivorSet ss = Messages.SurvivorSet.decode(survivorSet);
            checkRound(ss.roundId, ss.configDigest);
            if (!java.util.Arrays.equals(ss.bitmap, round.ackBitmap)) {
                throw new SecAggException(SecAggException.Kind.REFUSED_UNMASK,
                        "already acknowledged a different survivor set in this round");
            }
            return round.ack;
        }
        Round r = expect(Phase.MASKED);
        RoundConfig cfg = r.config;
        Messages.SurvivorSet ss = Messages.SurvivorSet.decode(survivorSet);
        checkRound(ss.roundId, ss.configDigest);
        Set<Long> survivors = Messages.fromBitmap(ss.bitmap, cfg.participants);
        if (!survivors.contains(deviceId)) {
            throw SecAggException.protocol("the survivor set omits this device, which sent its masked input");
        }
        for (long v : survivors) {
            if (r.neighbours.contains(v) && !r.held.containsKey(v)) {
                throw SecAggException.protocol("the survivor set contains neighbours that never shared keys with "
                        + "this device");
            }
        }
        if (survivors.size() < cfg.nMin) {
            throw SecAggException.abort("only " + survivors.size() + " devices survived, below n_min=" + cfg.nMin
                    + ": refusing to help unmask");
        }
        r.survivors = survivors;
        r.ackBitmap = ss.bitmap;
        r.ack = new Messages.SurvivorAck(cfg.roundId, r.digest, deviceId, survivorDigest(r.digest, ss.bitmap))
                .encode(identity::sign);
        phase = Phase.ACKED;
        return r.ack;
    }

    /**
     * Reveal one secret per held device, only under a certified survivor set: signatures on this device's U3
     * from {@link RoundConfig#certificateSize} distinct survivors, this device included (so no other survivor
     * set of the round can be certified: every honest device that reveals anything saw this one), t of them
     * this device and its neighbours.
     */
    public byte[] unmask(byte[] ackSet) throws SecAggException {
        if (phase == Phase.DONE) {
            return round.response;
        }
        Round r = expect(Phase.ACKED);
        RoundConfig cfg = r.config;
        Messages.AckSet acks = Messages.AckSet.decode(ackSet);
        checkRound(acks.roundId, acks.configDigest);
        byte[] digest = survivorDigest(r.digest, r.ackBitmap);
        int certificate = cfg.certificateSize();
        Set<Long> signers = new TreeSet<>(), neighbours = new TreeSet<>();
        signers.add(deviceId);
        neighbours.add(deviceId);
        for (byte[] raw : acks.acks) {
            if (signers.size() >= certificate && neighbours.size() >= cfg.threshold) {
                break;         // enough valid signatures on our U3; checking more only costs time
            }
            Messages.SurvivorAck ack = Messages.SurvivorAck.decode(raw, directory);
            checkRound(ack.roundId, ack.configDigest);
            if (!r.survivors.contains(ack.sender)) {
                throw SecAggException.protocol("acknowledgement from device " + ack.sender
                        + ", which is not a survivor");
            }
            if (!java.util.Arrays.equals(ack.digest, digest)) {
                throw SecAggException.protocol("device " + ack.sender + " saw a different survivor set");
            }
            if (!signers.add(ack.sender)) {
                throw SecAggException.protocol("two acknowledgements from device " + ack.sender);
            }
            if (r.neighbours.contains(ack.sender)) {
                neighbours.add(ack.sender);
            }
        }
        if (signers.size() < certificate) {
            throw SecAggException.abort("only " + signers.size() + " devices certified the survivor set; "
                    + certificate + " of the round's participants are needed");
        }
        if (neighbours.size() < cfg.threshold) {
            throw SecAggException.abort("only " + neighbours.size() + " neighbours confirmed the survivor set; "
                    + cfg.threshold + " needed");
        }
        List<Messages.Entry> bShares = new ArrayList<>(), sShares = new ArrayList<>();
        for (Map.Entry<Long, byte[][]> e : r.held.entrySet()) {
            long v = e.getKey();
            boolean alive = r.survivors.contains(v);
            Character previous = r.revealed.get(v);
            char secret = alive ? 'b' : 's';
            if (previous != null && previous != secret) {
                throw new SecAggException(SecAggException.Kind.REFUSED_UNMASK,
                        "refusing to reveal both secrets of device " + v);
            }
        }
        for (Map.Entry<Long, byte[][]> e : r.held.entrySet()) {
            long v = e.getKey();
            boolean alive = r.survivors.contains(v);
            r.revealed.put(v, alive ? 'b' : 's');
            (alive ? bShares : sShares).add(new Messages.Entry(v, alive ? e.getValue()[0] : e.getValue()[1]));
        }
        r.response = new Messages.UnmaskShares(cfg.roundId, r.digest, deviceId, bShares, sShares).encode(identity::sign);
        r.held = new TreeMap<>();          // the shares are no longer needed
        phase = Phase.DONE;
        return r.response;
    }
}
