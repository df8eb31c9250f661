package org.pategail.core;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.json.JSONException;
import org.json.JSONObject;
import org.pategail.core.secagg.FixedPoint;
import org.pategail.core.secagg.RoundConfig;

/**
 * The device's own record of what left it: one line per secure round it uploaded a masked vector to, with
 * the coordinator-signed parameters it relied on (round, M, n_min, survivors needed, noise scales) and the
 * ε those scales give. A reward upload is M sensitivity-1 queries (sums of scores in [0, 1]: ε = 1/b per
 * query for Σ D, 1/b_sq for Σ D²; Theorems 2–3); an environment upload is ONE Laplace vector query of L1
 * sensitivity Δ₁ = 2·{@link Contributions#ENV_L1_BOUND} + M quanta (ε = Δ₁ / min(b, b_sq)), as the Python
 * SDK's ledger records it ({@code pategail.sdk.secagg.ledger.round_release}). The total adds every upload's ε
 * (basic composition over queries and rounds: an upper bound the coordinator's accountant tightens). The owner
 * reads it in the app; it never leaves the device.
 */
public final class PrivacyLedger {
    /** One upload. */
    public static final class Entry {
        public final long round;
        public final int queries;
        public final int nMin;
        public final double sumScale;
        public final double sqSumScale;
        public final long unixSeconds;
        /** The upload was the environment vector (InitialStatesRequest): one vector query, not M. */
        public final boolean environment;
        /** The environment vector's L1 bound (9, or 10 with the action-rate part). */
        public final double l1Bound;

        Entry(long round, int queries, int nMin, double sumScale, double sqSumScale, long unixSeconds,
              boolean environment, double l1Bound) {
            this.round = round;
            this.queries = queries;
            this.nMin = nMin;
            this.sumScale = sumScale;
            this.sqSumScale = sqSumScale;
            this.unixSeconds = unixSeconds;
            this.environment = environment;
            this.l1Bound = l1Bound;
        }

        /** Per-query ε of the Σ D release (infinite without noise). */
        public double epsilonSum() {
            return sumScale > 0 ? 1.0 / sumScale : Double.POSITIVE_INFINITY;
        }

        /** Per-query ε of the Σ D² release (infinite without noise). */
        public double epsilonSqSum() {
            return sqSumScale > 0 ? 1.0 / sqSumScale : Double.POSITIVE_INFINITY;
        }

        /**
         * ε of the whole upload: Δ₁ / min(b, b_sq) for the environment vector (both halves as one Laplace
         * mechanism at the smaller scale), M · (1/b + 1/b_sq) for M reward queries; infinite without noise.
         */
        public double epsilon() {
            if (environment) {
                double b = Math.min(sumScale, sqSumScale);
                return b > 0 ? environmentSensitivity(queries, l1Bound) / b : Double.POSITIVE_INFINITY;
            }
            return queries * (epsilonSum() + epsilonSqSum());
        }
    }

    /**
     * L1 sensitivity (value units) of an environment upload of {@code values} entries and L1 bound
     * {@code l1Bound} ({@link Contributions#envL1Bound}): x and x² move by at most 2·l1Bound together, and
     * rounding each of the 2·values entries to the fixed point by at most half a quantum adds {@code values}
     * quanta ({@code pategail.sdk.accounting.laplace_vector_sensitivity}).
     */
    public static double environmentSensitivity(int values, double l1Bound) {
        return 2.0 * l1Bound + (double) values / FixedPoint.SCALE;
    }

    private final File file;
    private final List<Entry> entries = new ArrayList<>();

    /** The ledger kept in {@code file} (JSON lines), read if it exists; an unreadable line is an error. */
    public PrivacyLedger(File file) throws IOException {
        this.file = file;
        if (file.isFile()) {
            String[] lines = new String(Bundle.readAll(file), StandardCharsets.UTF_8).split("\n");
            for (int i = 0; i < lines.length; i++) {
                if (lines[i].trim().isEmpty()) {
                    continue;
                }
                try {
                    JSONObject o = new JSONObject(lines[i]);
                    entries.add(new Entry(o.getLong("round"), o.getInt("queries"), o.getInt("n_min"),
                            o.getDouble("sum_scale"), o.getDouble("sq_sum_scale"), o.getLong("time"),
                            o.optBoolean("environment", false),
                            o.optDouble("l1_bound", Contributions.ENV_L1_BOUND)));
                } catch (JSONException err) {
                    throw new IOException(file + ": line " + (i + 1) + ": " + err.getMessage());
                }
            }
        }
    }

    /**
     * Record an upload made under {@code config}, of the {@code environment} vector or of reward scores
     * (appended and synced before the upload is sent; the "environment" key is written only when true, so
     * older ledgers read as reward uploads).
     */
    public void record(RoundConfig config, boolean environment, double l1Bound, long unixSeconds) throws IOException {
        Entry e = new Entry(config.roundId, config.numQueries, config.nMin, config.sumNoiseScale,
                config.sqSumNoiseScale, unixSeconds, environment, l1Bound);
        try {
            JSONObject o = new JSONObject().put("round", e.round).put("queries", e.queries).put("n_min", e.nMin)
                    .put("sum_scale", e.sumScale).put("sq_sum_scale", e.sqSumScale).put("time", e.unixSeconds);
            if (environment) {
                o.put("environment", true).put("l1_bound", l1Bound);
            }
            String line = o.toString() + "\n";
            try (FileOutputStream out = new FileOutputStream(file, true)) {
                out.write(line.getBytes(StandardCharsets.UTF_8));
                out.getFD().sync();
            }
        } catch (JSONException err) {
            throw new IOException("cannot write the ledger entry: " + err.getMessage());
        }
        entries.add(e);
    }

    public List<Entry> entries() {
        return Collections.unmodifiableList(entries);
    }

    /** Σ over uploads of each upload's {@link Entry#epsilon()} (basic composition). */
    public double totalEpsilon() {
        double total = 0;
        for (Entry e : entries) {
            total += e.epsilon();
        }
        return total;
    }
}
