package org.pategail.core;

/**
 * A run's privately released cell table as the device sees it (the Python SDK's
 * {@code pategail.sdk.cell_universe}): what the device releases for it — its visited vector over the public
 * map — and how its days, kept on the public map, are read on the released table.
 */
public final class CellUniverse {
    private CellUniverse() {
    }

    /**
     * (nUniverse): 1 on the device's {@code maxCells} most-visited squares (slots spent there over all its days;
     * ties to the lower id), 0 elsewhere — at most {@code maxCells} ones, so the vector's L2 norm is at most
     * √maxCells whatever the days hold (the release's sensitivity). A square never visited is never marked.
     */
    public static double[] visitedVector(int[][] days, int nUniverse, long maxCells) {
        if (maxCells < 1) {
            throw new IllegalArgumentException("max_cells must be at least 1, got " + maxCells);
        }
        long[] slots = new long[nUniverse];
        for (int[] day : days) {
            for (int c : day) {
                if (c < 0 || c >= nUniverse) {
                    throw new IllegalArgumentException("cell ids must be in [0, " + nUniverse + ")");
                }
                slots[c]++;
            }
        }
        // the maxCells largest counts, first by count (descending) then by id: a bounded selection over the ids
        int k = (int) Math.min(maxCells, nUniverse);
        int[] top = new int[k];
        int n = 0;
        for (int c = 0; c < nUniverse; c++) {
            if (slots[c] == 0) {
                continue;
            }
            if (n == k && slots[c] <= slots[top[k - 1]]) {
                continue;                    // not above the k-th: ties go to the lower id, already held
            }
            int at = n < k ? n++ : k - 1;
            while (at > 0 && slots[top[at - 1]] < slots[c]) {
                top[at] = top[at - 1];
                at--;
            }
            top[at] = c;
        }
        double[] out = new double[nUniverse];
        for (int i = 0; i < n; i++) {
            out[top[i]] = 1.0;
        }
        return out;
    }

    /** {@code days} read through {@code table}: each cell id c replaced by table[c] (new arrays). */
    public static int[][] onTable(int[][] days, int[] table) {
        int[][] out = new int[days.length][];
        for (int i = 0; i < days.length; i++) {
            out[i] = new int[days[i].length];
            for (int t = 0; t < days[i].length; t++) {
                out[i][t] = table[days[i][t]];
            }
        }
        return out;
    }
}
