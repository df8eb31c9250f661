package org.pategail.core;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * The (state, action) features of the EPR decision — the discriminator's input — computed exactly as the
 * Python SDK's {@code features.py} (float64 arithmetic, float32 output), for real and generated days alike.
 * Row t of every output depends on slots 0..t of the day only.
 */
public final class Features {
    public static final int STAY = 0, HOME = 1, RETURN = 2, EXPLORE = 3;
    public static final int N_ACTIONS = 4;
    public static final int N_STATE_FEATURES = 11;
    public static final int N_PAIR_FEATURES = N_STATE_FEATURES + N_ACTIONS;
    public static final double EARTH_RADIUS_KM = 6371.0088;
    private static final double SCALE = 48.0;

    private Features() {
    }

    /** Great-circle distance in km between two points in degrees (haversine, clipped as numpy does). */
    public static double haversineKm(double lat1, double lon1, double lat2, double lon2) {
        double p1 = Math.toRadians(lat1), p2 = Math.toRadians(lat2);
        double dphi = p2 - p1;
        double dlmb = Math.toRadians(lon2) - Math.toRadians(lon1);
        double s1 = Math.sin(dphi / 2), s2 = Math.sin(dlmb / 2);
        double a = s1 * s1 + Math.cos(p1) * Math.cos(p2) * s2 * s2;
        return 2 * EARTH_RADIUS_KM * Math.asin(Math.sqrt(Math.min(1.0, Math.max(0.0, a))));
    }

    /**
     * float (T, 11): the state features of every slot of one day (slot_sin, slot_cos, at_home,
     * log_km_from_home, dwell, distinct, returnable, log_last_jump_km, log_gyration_km, home_share,
     * visits_here). {@code cells} is (n_cells, 2) latitude, longitude in degrees.
     */
    public static float[][] stateFeatures(int[] day, int home, double[][] cells, int daySlots) {
        int T = day.length;
        float[][] out = new float[T][N_STATE_FEATURES];
        double lat0 = cells[day[0]][0], lon0 = cells[day[0]][1];
        double homeLat = cells[home][0], homeLon = cells[home][1];
        double k = Math.PI / 180 * EARTH_RADIUS_KM;
        double cosLat0 = Math.cos(Math.toRadians(lat0));
        Map<Integer, Integer> visits = new HashMap<>();
        int distinct = 0, homeCount = 0, runStart = 0;
        boolean homeSeen = false;
        double sx = 0, sy = 0, s2 = 0;
        for (int t = 0; t < T; t++) {
            int c = day[t];
            double lat = cells[c][0], lon = cells[c][1];
            boolean atHome = c == home;
            int here = visits.merge(c, 1, Integer::sum);
            if (here == 1) {
                distinct++;
            }
            if (atHome) {
                homeSeen = true;
                homeCount++;
            }
            int returnable = distinct - (homeSeen ? 1 : 0) - (atHome ? 0 : 1);
            if (t > 0 && c != day[t - 1]) {
                runStart = t;
            }
            int dwell = t - runStart + 1;
            double kmHome = haversineKm(lat, lon, homeLat, homeLon);
            double jump = t == 0 ? 0.0 : haversineKm(cells[day[t - 1]][0], cells[day[t - 1]][1], lat, lon);
            double y = (lat - lat0) * k;
            double x = (lon - lon0) * k * cosLat0;
            sx += x;
            sy += y;
            s2 += x * x + y * y;
            double cnt = t + 1;
            double mx = sx / cnt, my = sy / cnt, m2 = s2 / cnt;
            double gyration = Math.sqrt(Math.max(m2 - mx * mx - my * my, 0.0));
            float[] row = out[t];
            row[0] = (float) Math.sin(2 * Math.PI * t / daySlots);
            row[1] = (float) Math.cos(2 * Math.PI * t / daySlots);
            row[2] = atHome ? 1f : 0f;
            row[3] = (float) Math.log1p(kmHome);
            row[4] = (float) (dwell / SCALE);
            row[5] = (float) (distinct / SCALE);
            row[6] = (float) (returnable / SCALE);
            row[7] = (float) Math.log1p(jump);
            row[8] = (float) Math.log1p(gyration);
            row[9] = (float) (homeCount / cnt);
            row[10] = (float) (here / SCALE);
        }
        return out;
    }

    /** float (T-1, 15): state features of slots 0..T-2 next to the one-hot action taken there. */
    public static float[][] pairFeatures(int[] day, int home, byte[] actions, double[][] cells) {
        float[][] states = stateFeatures(day, home, cells, DeviceMessages.SLOTS);
        float[][] out = new float[day.length - 1][N_PAIR_FEATURES];
        for (int t = 0; t < day.length - 1; t++) {
            System.arraycopy(states[t], 0, out[t], 0, N_STATE_FEATURES);
            int a = actions[t];
            if (a < 0 || a >= N_ACTIONS) {
                throw new IllegalArgumentException("action " + a + " at slot " + t + " is not 0..3");
            }
            out[t][N_STATE_FEATURES + a] = 1f;
        }
        return out;
    }

    /** The EPR action that explains each move l_t -> l_{t+1} of a real day (stay, home, return, explore). */
    public static byte[] labelActions(int[] day, int home) {
        byte[] out = new byte[day.length - 1];
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        for (int t = 0; t < day.length - 1; t++) {
            seen.add(day[t]);
            int next = day[t + 1];
            byte label = EXPLORE;
            if (seen.contains(next)) {
                label = RETURN;
            }
            if (next == home) {
                label = HOME;
            }
            if (next == day[t]) {
                label = STAY;
            }
            out[t] = label;
        }
        return out;
    }

    /** Which actions are possible at each slot (stay, explore always; home away from home; return when a
     * visited cell other than home and the current one exists). */
    public static boolean[][] actionMask(int[] day, int home) {
        boolean[][] mask = new boolean[day.length][N_ACTIONS];
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        boolean homeSeen = false;
        for (int t = 0; t < day.length; t++) {
            seen.add(day[t]);
            boolean atHome = day[t] == home;
            homeSeen |= atHome;
            int returnable = seen.size() - (homeSeen ? 1 : 0) - (atHome ? 0 : 1);
            mask[t][STAY] = true;
            mask[t][EXPLORE] = true;
            mask[t][HOME] = !atHome;
            mask[t][RETURN] = returnable > 0;
        }
        return mask;
    }

    /** The home cell: the most visited cell in the first {@code nightSlots} slots of the days; smallest id on ties. */
    public static int inferHome(int[][] days, int nightSlots) {
        TreeMap<Integer, Integer> counts = new TreeMap<>();
        for (int[] day : days) {
            for (int t = 0; t < nightSlots; t++) {
                counts.merge(day[t], 1, Integer::sum);
            }
        }
        int best = -1, bestCount = 0;
        for (Map.Entry<Integer, Integer> e : counts.entrySet()) {
            if (e.getValue() > bestCount) {
                best = e.getKey();
                bestCount = e.getValue();
            }
        }
        if (best < 0) {
            throw new IllegalArgumentException("no days to infer a home from");
        }
        return best;
    }
}
