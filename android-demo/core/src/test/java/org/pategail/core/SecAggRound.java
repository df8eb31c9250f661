package org.pategail.core;

import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.Checksum;
import org.pategail.core.secagg.Crypto;
import org.pategail.core.secagg.DeviceIdentity;
import org.pategail.core.secagg.FixedPoint;
import org.pategail.core.secagg.KeyDirectory;
import org.pategail.core.secagg.Messages;
import org.pategail.core.secagg.NeighbourGraph;
import org.pategail.core.secagg.RoundConfig;
import org.pategail.core.secagg.SecAggClient;
import org.pategail.core.secagg.SecAggException;
import org.pategail.core.secagg.Wire;

/**
 * A secure round among Java clients with the coordinator and the aggregator played here, so that a test can
 * hand one device exactly the frames a malicious aggregator would: the coordinator signs the configuration
 * and seals each device's checksum envelope; the aggregator relays what the devices sent, or whatever the
 * test builds with {@link #keyBroadcast}, {@link #delivery}, {@link #survivorSet} and {@link #ackSet}.
 */
final class SecAggRound {
    final SecureRandom random = new SecureRandom();
    final byte[] coordinatorKey = Crypto.randomKey(random);
    final byte[] ephemeral = Crypto.randomKey(random);
    final byte[] checksumKey = Crypto.randomKey(random);
    final Map<Long, DeviceIdentity> identities = new TreeMap<>();
    final Map<Long, SecAggClient> clients = new TreeMap<>();
    final KeyDirectory directory;
    final RoundConfig config;
    final byte[] digest;
    final NeighbourGraph graph;
    final Map<Long, byte[]> adverts = new TreeMap<>();
    final Map<Long, byte[]> shareKeys = new TreeMap<>();
    final Map<Long, byte[]> inputs = new TreeMap<>();
    final Map<Long, byte[]> acks = new TreeMap<>();

    /**
     * A round over {@code participants} (sorted ids); {@code given} supplies the identities of devices
     * played by something else (a {@link Device}), the others are generated here.
     */
    SecAggRound(long roundId, long[] participants, int numQueries, int nMin, int threshold, int degree,
                int colluders, Map<Long, DeviceIdentity> given) {
        this(roundId, participants, numQueries, nMin, threshold, degree, colluders, given, "laplace", 0.0, 0.0);
    }

    /** The same under {@code mechanism}: a Gaussian round (block 0: one vector) with σ {@code sigma} and the L2
     * clip norm {@code clipNorm}; a Laplace round without noise otherwise. */
    SecAggRound(long roundId, long[] participants, int numQueries, int nMin, int threshold, int degree,
                int colluders, Map<Long, DeviceIdentity> given, String mechanism, double sigma, double clipNorm) {
        Map<Long, KeyDirectory.DeviceKeys> keys = new HashMap<>();
        for (long d : participants) {
            DeviceIdentity id = given.containsKey(d) ? given.get(d) : DeviceIdentity.generate(random);
            identities.put(d, id);
            keys.put(d, new KeyDirectory.DeviceKeys(id.signingPublic, id.envelopePublic));
        }
        directory = new KeyDirectory(Crypto.ed25519Public(coordinatorKey), keys);
        for (long d : participants) {
            if (!given.containsKey(d)) {
                clients.put(d, new SecAggClient(d, identities.get(d), directory, random));
            }
        }
        byte[] seed = Crypto.randomKey(random);
        config = new RoundConfig(roundId, participants, numQueries, nMin, threshold, degree, sigma, 0.0, seed,
                Crypto.x25519Public(ephemeral), colluders, RoundConfig.COORDINATOR, FixedPoint.FRAC_BITS,
                Checksum.keyCommitment(checksumKey), mechanism, 0, clipNorm);
        digest = config.digest();
        graph = new NeighbourGraph(participants, seed, degree);
    }

    SecAggRound(long roundId, long[] participants, int numQueries, int nMin, int threshold, int degree,
                int colluders) {
        this(roundId, participants, numQueries, nMin, threshold, degree, colluders, new HashMap<>());
    }

    /** The directory as the coordinator signs it for the devices (the network frame). */
    byte[] signedDirectory() {
        return directory.toSignedBytes(data -> Crypto.sign(coordinatorKey, data));
    }

    byte[] signedConfig() {
        return config.toSignedBytes(data -> Crypto.sign(coordinatorKey, data));
    }

    /** The checksum envelope of {@code device}, carrying {@code key} (the committed one or not). */
    byte[] envelope(long device, byte[] key) throws SecAggException {
        byte[] shared = Crypto.agree(ephemeral, identities.get(device).envelopePublic);
        byte[] plain = new Wire.Writer().raw(key).u64(12345).bytes();
        byte[] sealed = Crypto.seal(Checksum.envelopeKey(shared, digest, device), plain,
                Checksum.envelopeAad(digest, device), random);
        return new Messages.ChecksumEnvelope(config.roundId, device, sealed).encode();
    }

    byte[] envelope(long device) throws SecAggException {
        return envelope(device, checksumKey);
    }

    Set<Long> neighbours(long device) {
        return graph.neighbours(device);
    }

    /** Every client here starts the round. */
    void advertise() throws SecAggException {
        for (Map.Entry<Long, SecAggClient> e : clients.entrySet()) {
            adverts.put(e.getKey(), e.getValue().startRound(signedConfig(), envelope(e.getKey())));
        }
    }

    /** The adverts of {@code device}'s neighbours that advertised. */
    byte[] keyBroadcast(long device) {
        List<byte[]> frames = new ArrayList<>();
        for (long v : neighbours(device)) {
            if (adverts.containsKey(v)) {
                frames.add(adverts.get(v));
            }
        }
        return new Messages.KeyBroadcast(config.roundId, digest, frames).encode();
    }

    void share() throws SecAggException {
        for (Map.Entry<Long, SecAggClient> e : clients.entrySet()) {
            shareKeys.put(e.getKey(), e.getValue().shareKeys(keyBroadcast(e.getKey())));
        }
    }

    /** The share ciphertexts addressed to {@code device} by the senders in {@code from}. */
    byte[] delivery(long device, Set<Long> from) throws SecAggException {
        List<Messages.Entry> shares = new ArrayList<>();
        for (Map.Entry<Long, byte[]> e : shareKeys.entrySet()) {
            if (!from.contains(e.getKey())) {
                continue;
            }
            for (Messages.Entry x : Messages.ShareKeys.decode(e.getValue(), directory).shares) {
                if (x.device == device) {
                    shares.add(new Messages.Entry(e.getKey(), x.data));
                }
            }
        }
        return new Messages.ShareDelivery(config.roundId, digest, device, shares).encode();
    }

    byte[] delivery(long device) throws SecAggException {
        return delivery(device, shareKeys.keySet());
    }

    double[] scores(long device) {
        double[] out = new double[config.numQueries];
        for (int i = 0; i < out.length; i++) {
            out[i] = ((device * 31 + i * 7) % 100) / 100.0;
        }
        return out;
    }

    void input() throws SecAggException {
        for (Map.Entry<Long, SecAggClient> e : clients.entrySet()) {
            inputs.put(e.getKey(), e.getValue().maskedInput(delivery(e.getKey()), scores(e.getKey())));
        }
    }

    byte[] survivorSet(Set<Long> survivors) {
        return new Messages.SurvivorSet(config.roundId, digest, Messages.toBitmap(survivors, config.participants))
                .encode();
    }

    byte[] survivorSet() {
        return survivorSet(inputs.keySet());
    }

    void acknowledge() throws SecAggException {
        byte[] set = survivorSet();
        for (Map.Entry<Long, SecAggClient> e : clients.entrySet()) {
            if (inputs.containsKey(e.getKey())) {
                acks.put(e.getKey(), e.getValue().consistencyCheck(set));
            }
        }
    }

    /** The acknowledgements of {@code senders}, in that order (repeats allowed). */
    byte[] ackSet(long... senders) {
        List<byte[]> frames = new ArrayList<>();
        for (long v : senders) {
            frames.add(acks.get(v));
        }
        return new Messages.AckSet(config.roundId, digest, frames).encode();
    }

    /** An acknowledgement signed by {@code sender} (a device's own key) of the survivor set {@code survivors}. */
    byte[] signedAck(long sender, Set<Long> survivors) {
        byte[] bitmap = Messages.toBitmap(survivors, config.participants);
        return new Messages.SurvivorAck(config.roundId, digest, sender, SecAggClient.survivorDigest(digest, bitmap))
                .encode(identities.get(sender)::sign);
    }

    /** Ids of the participants not in {@code exclude}, in order. */
    long[] others(Set<Long> exclude) {
        Set<Long> out = new TreeSet<>();
        for (long d : config.participants) {
            if (!exclude.contains(d)) {
                out.add(d);
            }
        }
        long[] ids = new long[out.size()];
        int i = 0;
        for (long d : out) {
            ids[i++] = d;
        }
        return ids;
    }

    static long[] ids(int n) {
        long[] out = new long[n];
        for (int i = 0; i < n; i++) {
            out[i] = 10 + 3L * i;
        }
        return out;
    }

    static String hex(byte[] b) {
        return Bytes.hex(b);
    }
}
