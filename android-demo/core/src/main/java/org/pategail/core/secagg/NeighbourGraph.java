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
}
