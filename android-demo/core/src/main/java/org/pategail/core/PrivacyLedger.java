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
import org.pategail.core.secagg.RoundConfig;

/**
 * The device's own record of what left it: one line per secure round it uploaded a masked vector to, with
 * the coordinator-signed parameters it relied on (round, M, n_min, survivors needed, noise scales) and the
 * per-query ε those scales give a sum of scores in [0, 1] (sensitivity 1: ε = 1/b for Σ D, 1/b_sq for
 * Σ D²; Theorems 2–3). The totals add ε over rounds (basic composition: an upper bound the coordinator's
 * accountant tightens). The owner reads it in the app; it never leaves the device.
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

        Entry(long round, int queries, int nMin, double sumScale, double sqSumScale, long unixSeconds) {
            this.round = round;
            this.queries = queries;
            this.nMin = nMin;
            this.sumScale = sumScale;
            this.sqSumScale = sqSumScale;
            this.unixSeconds = unixSeconds;
        }

        /** Per-query ε of the Σ D release (infinite without noise). */
        public double epsilonSum() {
            return sumScale > 0 ? 1.0 / sumScale : Double.POSITIVE_INFINITY;
        }

        /** Per-query ε of the Σ D² release (infinite without noise). */
        public double epsilonSqSum() {
            return sqSumScale > 0 ? 1.0 / sqSumScale : Double.POSITIVE_INFINITY;
        }
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
                            o.getDouble("sum_scale"), o.getDouble("sq_sum_scale"), o.getLong("time")));
                } catch (JSONException err) {
                    throw new IOException(file + ": line " + (i + 1) + ": " + err.getMessage());
                }
            }
        }
    }

    /** Record an upload made under {@code config} (appended and synced before the upload is sent). */
    public void record(RoundConfig config, long unixSeconds) throws IOException {
        Entry e = new Entry(config.roundId, config.numQueries, config.nMin, config.sumNoiseScale,
                config.sqSumNoiseScale, unixSeconds);
        try {
            String line = new JSONObject().put("round", e.round).put("queries", e.queries).put("n_min", e.nMin)
                    .put("sum_scale", e.sumScale).put("sq_sum_scale", e.sqSumScale).put("time", e.unixSeconds)
                    .toString() + "\n";
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

    /** Σ over uploads of the per-query ε of Σ D and of Σ D² (basic composition). */
    public double totalEpsilon() {
        double total = 0;
        for (Entry e : entries) {
            total += e.epsilonSum() + e.epsilonSqSum();
        }
        return total;
    }
}
