package org.pategail.core.secagg;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;

/**
 * A device's own privacy ledger (the Python SDK's {@code pategail.sdk.secagg.ledger.PrivacyLedger}, same file
 * and JSON format, so either SDK reads the other's): every release the device took part in, recorded with the
 * round's signed noise at the moment its masked input leaves, and composed by {@link Accounting}. With a
 * budget (the declared plan's target ε at its δ) it refuses, before sending anything, a round whose release
 * would take it past the budget, with the Python device's line; a round without noise has ε = ∞.
 *
 * <p>Composed as the Python device composes it ({@link Accounting#composedEpsilon}: the PLD accountant on
 * {@link #LEDGER_INTERVAL} for Laplace releases alone, the RDP accountant once a Gaussian release is among them),
 * so it reports the Python device's ε and refuses exactly the rounds and requests the Python device refuses.
 */
public final class PrivacyLedger {
    /** The Python SDK's format tag. */
    public static final String FORMAT = "pategail-device-ledger/1";
    /**
     * The PLD grid of the ledger: the grid the coordinator's privacy plan is calibrated on (the Python SDK's
     * {@code PLAN_INTERVAL}), so an honest run's planned releases never take a device past its budget.
     */
    public static final double LEDGER_INTERVAL = 3e-4;

    private final File file;
    private final Double targetEpsilon;
    private final double targetDelta;
    private List<Accounting.Release> releases = new ArrayList<>();
    private int unbounded;

    /**
     * The ledger kept in {@code file} (null: in memory), read if it exists; {@code targetEpsilon} null: keep the
     * record, refuse nothing. An unreadable file is a refusal of every round (protocol error), never a fresh
     * start from zero.
     */
    public PrivacyLedger(File file, Double targetEpsilon, double targetDelta) throws SecAggException {
        if (targetEpsilon != null && !(targetEpsilon > 0)) {
            throw new IllegalArgumentException("target_epsilon must be > 0 (or null)");
        }
        this.file = file;
        this.targetEpsilon = targetEpsilon;
        this.targetDelta = targetDelta;
        if (file != null && file.isFile()) {
            try {
                JSONObject state = new JSONObject(new String(RoundLog.readAll(file), StandardCharsets.UTF_8));
                if (!FORMAT.equals(state.optString("format", null))) {
                    throw new JSONException("format " + state.opt("format"));
                }
                JSONArray list = state.getJSONArray("releases");
                for (int i = 0; i < list.length(); i++) {
                    releases.add(Accounting.Release.fromJson(list.getJSONObject(i)));
                }
                unbounded = state.getInt("unbounded");
            } catch (IOException | JSONException | IllegalArgumentException err) {
                throw SecAggException.protocol(file + ": unreadable privacy ledger (" + err.getMessage() + ")");
            }
        }
    }

    /** A ledger in memory without a budget (tests, simulations). */
    public static PrivacyLedger inMemory() {
        try {
            return new PrivacyLedger(null, null, 1e-5);
        } catch (SecAggException err) {
            throw new IllegalStateException(err);       // nothing is read
        }
    }

    /** The ledger without a budget (the owner's record). */
    public static PrivacyLedger read(File file) throws SecAggException {
        return new PrivacyLedger(file, null, 1e-5);
    }

    public List<Accounting.Release> releases() {
        return Collections.unmodifiableList(releases);
    }

    /** Rounds taken part in without noise (possible only without a budget): ε = ∞. */
    public int unbounded() {
        return unbounded;
    }

    /**
     * The release a device takes part in when it uploads in round {@code cfg}; null when a sum has no noise. A
     * Gaussian round is one vector query of its clip norm's L2 sensitivity; a Laplace round uploading the
     * environment vector one Laplace vector query of its L1 sensitivity; any other Laplace round M queries.
     */
    public static Accounting.Release roundRelease(RoundConfig cfg, boolean environment, double envL1Bound) {
        if (cfg.isGaussian()) {
            return cfg.sumNoiseScale <= 0 ? null : Accounting.Release.gaussian(cfg.sumNoiseScale,
                    Accounting.gaussianSensitivity(cfg.clipNorm, cfg.numQueries), 1, cfg.noiseDivisor());
        }
        if (cfg.sumNoiseScale <= 0 || cfg.sqSumNoiseScale <= 0) {
            return null;
        }
        if (environment) {
            return Accounting.laplaceVectorRelease(cfg.sumNoiseScale, cfg.sqSumNoiseScale,
                    Accounting.laplaceVectorSensitivity(envL1Bound, cfg.numQueries));
        }
        return Accounting.Release.laplace(cfg.sumNoiseScale, cfg.sqSumNoiseScale, cfg.numQueries);
    }

    /** Composed ε at the budget's δ (1e-5 without one) of everything recorded; ∞ after a noiseless round. */
    public double epsilon() {
        return epsilon(null);
    }

    /** The same with {@code extra} added (null: nothing). */
    public double epsilon(Accounting.Release extra) {
        if (unbounded > 0) {
            return Double.POSITIVE_INFINITY;
        }
        return Accounting.composedEpsilon(extra == null ? releases : Accounting.merge(releases, extra), targetDelta,
                LEDGER_INTERVAL);
    }

    /** Whether {@code extra} would take the ledger past its budget: the ε after it, or NaN when within it. */
    public double pastBudget(Accounting.Release extra) {
        if (targetEpsilon == null) {
            return Double.NaN;
        }
        double eps = epsilon(extra);
        return eps > targetEpsilon ? eps : Double.NaN;
    }

    /**
     * The Python device's refusal of a request ({@code check_request_budget}): the line of an ErrorReply
     * "budget" when answering a request of {@code values} values (the environment request when
     * {@code environment}) at {@code plan}'s noise would take this ledger past its budget; null when it would not.
     */
    public String requestRefusal(PrivacyPlan plan, long round, int values, boolean environment) {
        return requestRefusal(plan, round, values, environment, false);
    }

    /** The same; {@code cells}: the cell-table release's request (at the plan's cell-release multiplier). */
    public String requestRefusal(PrivacyPlan plan, long round, int values, boolean environment, boolean cells) {
        double after = pastBudget(plan.requestRelease(values, environment, cells));
        if (Double.isNaN(after)) {
            return null;
        }
        return "round " + round + ": answering would take this device to ε = " + DevicePolicy.g(after, 4)
                + ", past its budget " + DevicePolicy.g6(plan.targetEpsilon) + "; refused";
    }

    public Double targetEpsilon() {
        return targetEpsilon;
    }

    /** A protocol error (the Python device's RoundRefused "budget") if taking part in {@code cfg} could exceed
     * the budget; nothing changes. */
    public void check(RoundConfig cfg, boolean environment, double envL1Bound) throws SecAggException {
        if (targetEpsilon == null) {
            return;
        }
        Accounting.Release release = roundRelease(cfg, environment, envL1Bound);
        if (release == null) {
            throw SecAggException.protocol("round " + cfg.roundId + " adds no noise to a sum: ε = ∞ for this device");
        }
        double after = pastBudget(release);
        if (!Double.isNaN(after)) {
            throw SecAggException.protocol("round " + cfg.roundId + " would take this device to ε = "
                    + DevicePolicy.g(after, 4) + ", past its budget " + DevicePolicy.g6(targetEpsilon) + " (δ = "
                    + DevicePolicy.g6(targetDelta) + ")");
        }
    }

    /** Account {@code cfg}'s release; on disk (written whole, then renamed) before it returns. */
    public void record(RoundConfig cfg, boolean environment, double envL1Bound) throws IOException {
        Accounting.Release release = roundRelease(cfg, environment, envL1Bound);
        List<Accounting.Release> after = release == null ? releases : Accounting.merge(releases, release);
        int unboundedAfter = unbounded + (release == null ? 1 : 0);
        if (file != null) {
            try {
                JSONArray list = new JSONArray();
                for (Accounting.Release r : after) {
                    list.put(r.toJson());
                }
                JSONObject state = new JSONObject().put("format", FORMAT).put("releases", list)
                        .put("unbounded", unboundedAfter);
                RoundLog.write(file, state.toString().getBytes(StandardCharsets.UTF_8));
            } catch (JSONException err) {
                throw new IOException("cannot write the ledger: " + err.getMessage());
            }
        }
        releases = after;
        unbounded = unboundedAfter;
    }
}
