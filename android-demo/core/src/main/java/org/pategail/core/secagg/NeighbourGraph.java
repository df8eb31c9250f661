package org.pategail.core.secagg;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Who masks with whom (the Python SDK's {@code graph.py}): all pairs, or the SecAgg+ Harary graph over a
 * ring ordered by AES-CTR keys expanded from the coordinator-signed round seed (stable sort, unsigned keys).
 */
public final class NeighbourGraph {
    private final long[] participants;
    private final boolean complete;
    private final int degree;
    private long[] ring;
    private final Map<Long, Integer> position = new HashMap<>();

    public NeighbourGraph(long[] participants, byte[] roundSeed, int degree) {
        this.participants = participants.clone();
        int n = participants.length;
        this.complete = degree == 0 || degree >= n - 1;
        this.degree = complete ? n - 1 : degree;
        if (!complete) {
            if (degree % 2 != 0) {
                throw new IllegalArgumentException("the SecAgg+ degree must be even");
            }
            long[] keys = Prg.expandUint64(Crypto.hkdf(roundSeed, "graph"), n);
            Integer[] order = new Integer[n];
            for (int i = 0; i < n; i++) {
                order[i] = i;
            }
            Arrays.sort(order, (i, j) -> Long.compareUnsigned(keys[i], keys[j]));   // merge sort: stable
            ring = new long[n];
            for (int p = 0; p < n; p++) {
                ring[p] = participants[order[p]];
                position.put(ring[p], p);
            }
        }
    }

    /** The devices {@code device} masks with and shares its secrets with (never itself). */
    public Set<Long> neighbours(long device) {
        Set<Long> out = new TreeSet<>();
        if (complete) {
            boolean member = false;
            for (long p : participants) {
                if (p == device) {
                    member = true;
                } else {
                    out.add(p);
                }
            }
            if (!member) {
                throw new IllegalArgumentException("device " + device + " is not a participant");
            }
            return out;
        }
        Integer p = position.get(device);
        if (p == null) {
            throw new IllegalArgumentException("device " + device + " is not a participant");
        }
        int n = ring.length, half = degree / 2;
        for (int o = -half; o <= half; o++) {
            if (o != 0) {
                out.add(ring[Math.floorMod(p + o, n)]);
            }
        }
        return out;
    }

    /** Whether a round of {@code n} participants at {@code degree} masks all pairs (degree 0 or at least n - 1). */
    public static boolean isComplete(int n, int degree) {
        return degree == 0 || degree >= n - 1;
    }

    /**
     * The lowest Shamir threshold a device accepts for a round of {@code n} participants at {@code degree}
     * (0: all pairs) with up to {@code colluders} devices on the aggregator's side (the Python SDK's
     * {@code graph.secure_threshold}, where the argument is written out): floor((n + c) / 2) + 1 for all
     * pairs; k/2 + 2 + c for a SecAgg+ graph of degree k. Below it, a group of devices could be opened apart
     * from the other survivors: with all pairs, a survivor that did not acknowledge could be opened through
     * the holders outside the neighbours it masked with; in a SecAgg+ ring, a window of k/2 + 1 consecutive
     * devices is a clique whose sum a strict majority of holders would open on its own.
     */
    public static int secureThreshold(int n, int degree, int colluders) {
        if (isComplete(n, degree)) {
            return (n + colluders) / 2 + 1;
        }
        return degree / 2 + 2 + colluders;
    }

    /**
     * How many participants must have signed one survivor set before an honest device reveals any share:
     * floor((n + c) / 2) + 1 (the Python SDK's {@code graph.certificate_size}). An honest device signs one
     * survivor set a round and the c colluders may sign any number, so two different sets can gather at most
     * (n - c) + 2c = n + c signatures between them, fewer than twice this size: at most one survivor set per
     * round is certified, whatever views the aggregator shows.
     */
    public static int certificateSize(int n, int colluders) {
        return (n + colluders) / 2 + 1;
    }
}
