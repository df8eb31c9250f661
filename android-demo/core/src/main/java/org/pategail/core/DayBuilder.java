package org.pategail.core;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * From the phone's own GPS fixes to days of the bundle's cells, with the rules of the Python pipeline
 * ({@code pategail.data.gridding}) applied to the bundle's fixed cell table: a fix belongs to its nearest
 * cell (great-circle); a local day has 48 half-hour slots; a slot with fixes takes the cell holding most of
 * them (ties: the cell whose first fix came earliest, then the smaller id); days with fewer than
 * {@code minObservedSlots} observed slots are dropped; empty slots take the last observed cell before them,
 * leading ones the first observed cell. Runs on the phone only: the days never leave it.
 */
public final class DayBuilder {
    public static final int SLOTS = DeviceMessages.SLOTS;

    private DayBuilder() {
    }

    /** The nearest cell of a point (brute force over the table: a few thousand cells, once per fix). */
    public static int nearestCell(double[][] cells, double lat, double lon) {
        int best = -1;
        double bestKm = Double.POSITIVE_INFINITY;
        for (int c = 0; c < cells.length; c++) {
            double km = Features.haversineKm(lat, lon, cells[c][0], cells[c][1]);
            if (km < bestKm) {
                bestKm = km;
                best = c;
            }
        }
        return best;
    }

    /** Per slot: cell -> [fix count, time of its first fix]. */
    private static final class Slot {
        final Map<Integer, long[]> cells = new HashMap<>();

        void add(int cell, long time) {
            long[] c = cells.get(cell);
            if (c == null) {
                cells.put(cell, new long[]{1, time});
            } else {
                c[0]++;
                c[1] = Math.min(c[1], time);
            }
        }

        int modal() {
            int best = -1;
            long[] b = null;
            for (Map.Entry<Integer, long[]> e : cells.entrySet()) {
                long[] c = e.getValue();
                boolean better = b == null || c[0] > b[0] || (c[0] == b[0] && (c[1] < b[1]
                        || (c[1] == b[1] && e.getKey() < best)));
                if (better) {
                    best = e.getKey();
                    b = c;
                }
            }
            return best;
        }
    }

    /**
     * Days (n, 48) in date order from fixes (unix seconds UTC, degrees); {@code utcOffsetHours} sets the local
     * day. Fixes with a non-finite or out-of-range coordinate are an error naming the fix.
     */
    public static int[][] fixesToDays(long[] time, double[] lat, double[] lon, double[][] cells, double utcOffsetHours,
                                      int minObservedSlots) {
        if (time.length != lat.length || lat.length != lon.length) {
            throw new IllegalArgumentException("time, lat and lon must have the same length");
        }
        if (minObservedSlots < 1 || minObservedSlots > SLOTS) {
            throw new IllegalArgumentException("minObservedSlots must be in [1, " + SLOTS + "]");
        }
        TreeMap<Long, Slot[]> byDay = new TreeMap<>();
        for (int i = 0; i < time.length; i++) {
            if (!(Math.abs(lat[i]) <= 90 && Math.abs(lon[i]) <= 180)) {
                throw new IllegalArgumentException("fix " + i + ": coordinate out of range");
            }
            double local = time[i] + utcOffsetHours * 3600.0;
            long day = (long) Math.floor(local / 86400.0);
            int slot = (int) Math.min(SLOTS - 1, Math.floor((local - day * 86400.0) / 1800.0));
            Slot[] slots = byDay.computeIfAbsent(day, d -> new Slot[SLOTS]);
            if (slots[slot] == null) {
                slots[slot] = new Slot();
            }
            slots[slot].add(nearestCell(cells, lat[i], lon[i]), time[i]);
        }
        List<int[]> out = new ArrayList<>();
        for (Slot[] slots : byDay.values()) {
            int[] row = new int[SLOTS];
            int observed = 0, first = -1;
            for (int t = 0; t < SLOTS; t++) {
                row[t] = slots[t] == null ? -1 : slots[t].modal();
                if (row[t] >= 0) {
                    observed++;
                    if (first < 0) {
                        first = row[t];
                    }
                }
            }
            if (observed < minObservedSlots) {
                continue;
            }
            int last = first;
            for (int t = 0; t < SLOTS; t++) {
                if (row[t] < 0) {
                    row[t] = last;
                } else {
                    last = row[t];
                }
            }
            out.add(row);
        }
        return out.toArray(new int[0][]);
    }
}
