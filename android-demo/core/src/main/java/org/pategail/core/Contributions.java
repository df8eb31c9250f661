package org.pategail.core;

import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * A device's environment contribution for an InitialStatesRequest, as the Python SDK computes it
 * ({@link #environment}, the Python SDK's {@code environment_vector}): the initial-state, explore-law and place
 * contributions, the region sums of a Gaussian run and the action-rate part. Every entry is in [0, 1].
 */
public final class Contributions {
    /** Days after which a device's weight stops growing (the Python SDK's DAYS_CAP). */
    public static final int DAYS_CAP = 100;

    /**
     * L1 norm no honest environment vector exceeds (the Python SDK's {@code contribution.ENV_L1_BOUND}): six
     * parts with entries >= 0 summing to at most w <= 1 (home one-hot, first cells with the at-home share, the
     * weight, explore observed, explore expected, place visits) and the return law's three entries, each at most
     * w: 6 + 3 = 9. The privacy plan's environment noise is sized for it.
     */
    public static final double ENV_L1_BOUND = 9.0;

    private Contributions() {
    }

    /**
     * float64 (2 n_cells + 2): w x one-hot home, w x first-cell shares away from home, w x share at home, w; with
     * w = min(1, days / daysCap) (the bundle's environment.initial_states_days_cap, {@link #DAYS_CAP} when absent).
     */
    public static double[] initialStates(int[][] days, int home, int nCells, int daysCap) {
        if (home < 0 || home >= nCells) {
            throw new IllegalArgumentException("home " + home + " is not a cell id (0.." + (nCells - 1) + ")");
        }
        if (daysCap < 1) {
            throw new IllegalArgumentException("the days cap must be at least 1");
        }
        double[] out = new double[2 * nCells + 2];
        double w = Math.min(1.0, days.length / (double) daysCap);
        out[home] = w;
        out[2 * nCells + 1] = w;
        if (days.length > 0) {
            int atHome = 0;
            int[] away = new int[nCells];
            for (int[] d : days) {
                if (d[0] == home) {
                    atHome++;
                } else {
                    away[d[0]]++;
                }
            }
            for (int c = 0; c < nCells; c++) {
                out[nCells + c] = w * away[c] / days.length;
            }
            out[2 * nCells] = w * atHome / days.length;
        }
        return out;
    }

    /** K, the explore candidates per cell: {@code candidates}, or every other cell of a smaller table. */
    public static int candidateCount(int nCells, int candidates) {
        int k = Math.min(candidates, nCells - 1);
        if (k < 1) {
            throw new IllegalArgumentException("the EPR environment needs at least two cells");
        }
        return k;
    }

    /** Bins of ranks 1..K: bin 0 is rank 1, bin b >= 1 ranks 2^(b-1)+1 .. 2^b. */
    static int rankBin(int rank) {
        return 32 - Integer.numberOfLeadingZeros(rank - 1);
    }

    public static int nRankBins(int k) {
        return rankBin(k) + 1;
    }

    /** The K nearest other cells of {@code cell} by great-circle distance, ties by cell id (rank r+1 at r). */
    public static int[] nearestCells(double[][] cells, int cell, int k) {
        int n = cells.length;
        double[] d = new double[n];
        Integer[] idx = new Integer[n];
        for (int i = 0; i < n; i++) {
            d[i] = i == cell ? Double.POSITIVE_INFINITY
                    : Features.haversineKm(cells[cell][0], cells[cell][1], cells[i][0], cells[i][1]);
            idx[i] = i;
        }
        Arrays.sort(idx, (a, b) -> d[a] != d[b] ? Double.compare(d[a], d[b]) : Integer.compare(a, b));
        int[] out = new int[k];
        for (int r = 0; r < k; r++) {
            out[r] = idx[r];
        }
        return out;
    }

    /** float64 (2B): w x observed explore destinations per rank bin, w x what the pure power law expected. */
    public static double[] exploreLaw(int[][] days, int home, double[][] cells, double alpha, int candidates) {
        int k = candidateCount(cells.length, candidates);
        int nBins = nRankBins(k);
        double[] out = new double[2 * nBins];
        if (days.length == 0) {
            return out;
        }
        double[] rankWeight = new double[k];
        for (int r = 1; r <= k; r++) {
            rankWeight[r - 1] = Math.pow(r, -alpha);
        }
        Map<Integer, int[]> nearest = new HashMap<>();
        double[] observed = new double[nBins], expected = new double[nBins];
        int moves = 0;
        for (int[] day : days) {
            byte[] labels = Features.labelActions(day, home);
            Set<Integer> seen = new HashSet<>();
            for (int t = 0; t < labels.length; t++) {
                seen.add(day[t]);
                if (labels[t] != Features.EXPLORE) {
                    continue;
                }
                int[] cand = nearest.computeIfAbsent(day[t], c -> nearestCells(cells, c, k));
                int rank = 0;
                for (int r = 0; r < k; r++) {
                    if (cand[r] == day[t + 1]) {
                        rank = r + 1;
                        break;
                    }
                }
                if (rank == 0) {
                    continue;                           // beyond the K candidates: not part of the law
                }
                moves++;
                observed[rankBin(rank)] += 1;
                double[] perBin = new double[nBins];
                double total = 0;
                for (int r = 0; r < k; r++) {
                    if (!seen.contains(cand[r])) {
                        perBin[rankBin(r + 1)] += rankWeight[r];
                        total += rankWeight[r];
                    }
                }
                for (int b = 0; b < nBins; b++) {
                    expected[b] += perBin[b] / total;
                }
            }
        }
        if (moves == 0) {
            return out;
        }
        double w = Math.min(1.0, days.length / (double) DAYS_CAP);
        for (int b = 0; b < nBins; b++) {
            out[b] = w * observed[b] / moves;
            out[nBins + b] = w * expected[b] / moves;
        }
        return out;
    }

    /**
     * float64 (3 x nRegions, row-major): the home, first-cell and visit parts of a device's
     * {@link #initialStates} and {@link #places} summed over the regions of {@code regionOf}
     * ({@link Regions#regionMap}; the Python SDK's {@code coarse_contribution}). Each row sums to its part's
     * own sum (at most w), so its L2 norm is at most 1, as each fine part's.
     */
    public static double[] coarse(double[] initialStates, double[] places, int[] regionOf, int nRegions) {
        int n = regionOf.length;
        double[] out = new double[3 * nRegions];
        for (int c = 0; c < n; c++) {
            out[regionOf[c]] += initialStates[c];
            out[nRegions + regionOf[c]] += initialStates[n + c];
            out[2 * nRegions + regionOf[c]] += places[c];
        }
        return out;
    }

    /**
     * One device's environment vector (the Python SDK's {@code environment_vector}): the initial states, the
     * explore law, the place contribution, then — with {@code regionCells} > 0 (Gaussian runs) — the coarse parts
     * over the table's regions of at most that many cells, then — with {@code actionRates} — the action-rate part.
     * The initial states are weighted with {@code initialStatesDaysCap}, the rest with {@link #DAYS_CAP}.
     */
    public static double[] environment(int[][] days, int home, double[][] cells, double alpha, int candidates,
                                       int regionCells, boolean actionRates, int initialStatesDaysCap) {
        int n = cells.length;
        double[] a = initialStates(days, home, n, initialStatesDaysCap);
        double[] b = exploreLaw(days, home, cells, alpha, candidates);
        double[] c = places(days, home, n);
        double[] coarse = new double[0];
        if (regionCells > 0) {
            int[] regionOf = Regions.regionMap(cells, regionCells);
            coarse = coarse(a, c, regionOf, Regions.count(regionOf));
        }
        double[] d = actionRates ? actionRates(days, home) : new double[0];
        double[] out = new double[a.length + b.length + c.length + coarse.length + d.length];
        int at = 0;
        for (double[] part : new double[][]{a, b, c, coarse, d}) {
            System.arraycopy(part, 0, out, at, part.length);
            at += part.length;
        }
        return out;
    }

    /** What the action-rate part adds to the L1 bound of an honest environment vector (the Python SDK's
     * {@code contribution.ACTION_RATES_L1}): its entries are >= 0 and sum to w <= 1. */
    public static final double ACTION_RATES_L1 = 1.0;
    /** Slots per time-of-day bucket of the action-rate table (3 hours: 8 buckets over 47 decisions). */
    public static final int SLOT_BUCKET = 6;
    /** Distinct-cells-so-far buckets: 1, 2, 3, 4, 5 or more. */
    public static final int COUNT_BUCKETS = 5;
    static final int N_SLOT_BUCKETS = (DeviceMessages.SLOTS - 1 + SLOT_BUCKET - 1) / SLOT_BUCKET;

    /** The L1 bound of an honest environment vector, with or without the action-rate part. */
    public static double envL1Bound(boolean actionRates) {
        return ENV_L1_BOUND + (actionRates ? ACTION_RATES_L1 : 0.0);
    }

    /** Entries of the action-rate part: (slot bucket, at home, distinct bucket, action), flattened C-order. */
    public static int actionRateLength() {
        return N_SLOT_BUCKETS * 2 * COUNT_BUCKETS * Features.N_ACTIONS;
    }

    /**
     * The action-rate part of the environment vector (the Python SDK's {@code action_rate_contribution}): w ×
     * the share of the device's labelled decisions (slot t to t + 1) in each cell (t / SLOT_BUCKET, at home at t,
     * distinct cells among l_0..l_t bucketed 1..5+, the action), w = min(1, days / DAYS_CAP); zeros without days.
     */
    public static double[] actionRates(int[][] days, int home) {
        double[] counts = new double[actionRateLength()];
        double[] out = new double[counts.length];
        if (days.length == 0) {
            return out;
        }
        double total = 0;
        for (int[] day : days) {
            byte[] labels = Features.labelActions(day, home);
            java.util.Set<Integer> seen = new java.util.HashSet<>();
            for (int t = 0; t < labels.length; t++) {
                seen.add(day[t]);
                int k = Math.min(seen.size() - 1, COUNT_BUCKETS - 1);
                int cell = ((t / SLOT_BUCKET * 2 + (day[t] == home ? 1 : 0)) * COUNT_BUCKETS + k) * Features.N_ACTIONS
                        + labels[t];
                counts[cell] += 1.0;
                total += 1.0;
            }
        }
        double w = Math.min(1.0, days.length / (double) DAYS_CAP);
        for (int i = 0; i < out.length; i++) {
            out[i] = w * counts[i] / total;
        }
        return out;
    }

    /** Entries of one device's place contribution: relevance (nCells), then the return law (3). */
    public static int placeLength(int nCells) {
        return nCells + 3;
    }

    /**
     * One device's contribution to the learned place law (the Python SDK's {@code place_contribution}), every
     * entry in [0, 1], with w = min(1, days / DAYS_CAP): [0, nCells) w times the share of the device's slots
     * spent in each cell; [nCells] w times the share of its eligible return moves (the place just left is not
     * home) that went to the place just left; [nCells + 1] w times the mean visits-proportional probability of
     * the place just left at those moves; [nCells + 2] w when it has such moves, else 0.
     */
    public static double[] places(int[][] days, int home, int nCells) {
        if (home < 0 || home >= nCells) {
            throw new IllegalArgumentException("home " + home + " is not a cell id (0.." + (nCells - 1) + ")");
        }
        double[] out = new double[placeLength(nCells)];
        if (days.length == 0) {
            return out;
        }
        double w = Math.min(1.0, days.length / (double) DAYS_CAP);
        long slots = 0;
        long[] visits = new long[nCells];
        int moves = 0;
        double went = 0;
        double expected = 0;
        for (int[] day : days) {
            slots += day.length;
            for (int c : day) {
                visits[c]++;
            }
            byte[] labels = Features.labelActions(day, home);
            int left = -1;                                   // the cell of the run before the current one
            for (int t = 0; t < labels.length; t++) {
                if (t > 0 && day[t] != day[t - 1]) {
                    left = day[t - 1];
                }
                if (labels[t] != Features.RETURN || left < 0 || left == home) {
                    continue;
                }
                moves++;
                if (day[t + 1] == left) {
                    went += 1;
                }
                int visitsLeft = 0;
                int returnable = 0;
                for (int s = 0; s <= t; s++) {
                    if (day[s] == left) {
                        visitsLeft++;
                    }
                    if (day[s] != home && day[s] != day[t]) {
                        returnable++;
                    }
                }
                expected += visitsLeft / (double) returnable;
            }
        }
        for (int c = 0; c < nCells; c++) {
            out[c] = w * visits[c] / slots;
        }
        if (moves > 0) {
            out[nCells] = w * went / moves;
            out[nCells + 1] = w * expected / moves;
            out[nCells + 2] = w;
        }
        return out;
    }
}
