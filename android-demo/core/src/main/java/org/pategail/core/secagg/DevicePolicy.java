package org.pategail.core.secagg;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

import org.json.JSONObject;

/**
 * The device's own floors on a coordinator-signed round configuration (the Python SDK's
 * {@code pategail.sdk.secagg.policy.DevicePolicy}), from the privacy plan its bundle declares (the manifest's
 * "privacy" section, remembered in {@code privacy-plan.json}). A valid signature says who chose a
 * configuration, not that it is safe; before its first message of a round the device refuses:
 * <ul>
 * <li>a Shamir threshold below {@link NeighbourGraph#secureThreshold} (always, with or without a plan);</li>
 * <li>n_min below {@code minSurvivors} of the participants;</li>
 * <li>fewer colluders than the plan sizes the noise shares for;</li>
 * <li>a round of another mechanism than the plan's;</li>
 * <li>under a Gaussian plan, a release of a kind the plan does not plan at all (a cell-table round under a plan
 * without a cell release; a reward or environment round under the plan of a bundle on the public map, which plans
 * the cell-table release only), and each kind below its own noise multiplier (reward, environment, cell table);
 * a cell-table round of the Laplace mechanism;</li>
 * <li>an environment round whose noise multiplier — the smaller scale over the release's L1 sensitivity
 * 2·L1 bound + M quanta — is below the plan's environment multiplier (when the plan declares one);</li>
 * <li>otherwise, a noise scale on Σ D or Σ D² below the plan's.</li>
 * </ul>
 * The refusal is one line, word for word the Python device's, as a protocol error before anything is sent.
 */
public final class DevicePolicy {
    /** No plan: only the secure threshold. */
    public static final DevicePolicy NONE = new DevicePolicy(0, 0, 0, 0, null, 0, 0, 0);

    public final double minSurvivorShare;
    public final double minSumNoiseScale;
    public final double minSqSumNoiseScale;
    public final int minColluders;
    /** "laplace" or "gaussian" (the plan's); null: any. */
    public final String mechanism;
    /** Gaussian reward rounds: the smallest σ / Δ₂ (noise std over the L2 sensitivity of the signed clip norm). */
    public final double minNoiseMultiplier;
    /** Environment rounds: σ / Δ₂ (Gaussian) or b / Δ₁ (Laplace; 0: the per-value floors apply). */
    public final double minEnvNoiseMultiplier;
    /** Cell-table rounds (Gaussian): the smallest σ / Δ₂ of the release of the visited squares; 0: none planned. */
    public final double minCellsNoiseMultiplier;

    public DevicePolicy(double minSurvivorShare, double minSumNoiseScale, double minSqSumNoiseScale, int minColluders,
                        String mechanism, double minNoiseMultiplier, double minEnvNoiseMultiplier,
                        double minCellsNoiseMultiplier) {
        this.minSurvivorShare = minSurvivorShare;
        this.minSumNoiseScale = minSumNoiseScale;
        this.minSqSumNoiseScale = minSqSumNoiseScale;
        this.minColluders = minColluders;
        this.mechanism = mechanism;
        this.minNoiseMultiplier = minNoiseMultiplier;
        this.minEnvNoiseMultiplier = minEnvNoiseMultiplier;
        this.minCellsNoiseMultiplier = minCellsNoiseMultiplier;
    }

    /**
     * The floors a declared plan implies (the Python SDK's {@code DeclaredPlan.policy}); IllegalArgumentException
     * naming what is wrong when the section is not a valid plan (the Python SDK's checks).
     */
    public static DevicePolicy fromPlan(JSONObject plan) {
        return PrivacyPlan.fromManifest(plan).policy();
    }

    /**
     * SecAggException (protocol) naming the first floor {@code cfg} is below; {@code environment}: the round would
     * upload the device's environment vector, of L1 bound {@code envL1Bound}.
     */
    public void check(RoundConfig cfg, boolean environment, double envL1Bound) throws SecAggException {
        check(cfg, environment, envL1Bound, false);
    }

    /** The same; {@code cells}: the round would upload the device's visited vector (a cell-table release). */
    public void check(RoundConfig cfg, boolean environment, double envL1Bound, boolean cells) throws SecAggException {
        int floor = NeighbourGraph.secureThreshold(cfg.participants.length, cfg.degree, cfg.colluders);
        if (cfg.threshold < floor) {
            refuse(cfg, "Shamir threshold " + cfg.threshold + " is below this device's floor " + floor + " for "
                    + cfg.holders() + " share holders and " + cfg.colluders + " colluders (the secure threshold)");
        }
        int nFloor = Math.max(1, (int) Math.ceil(minSurvivorShare * cfg.participants.length - 1e-9));
        if (cfg.nMin < nFloor) {
            refuse(cfg, "n_min=" + cfg.nMin + " is below this device's floor " + nFloor);
        }
        if (cfg.colluders < minColluders) {
            refuse(cfg, "noise sized for " + cfg.colluders + " colluders, the plan declares " + minColluders);
        }
        if (mechanism != null && !cfg.mechanism.equals(mechanism)) {
            refuse(cfg, "a " + cfg.mechanism + " round, the declared privacy plan's mechanism is " + mechanism);
        }
        if (cfg.isGaussian()) {
            String kind = cells ? "cell-table" : environment ? "environment" : "reward";
            double zFloor = cells ? minCellsNoiseMultiplier : environment ? minEnvNoiseMultiplier : minNoiseMultiplier;
            if (mechanism != null && zFloor <= 0) {         // a plan in force that plans no release of this kind
                refuse(cfg, "the declared privacy plan plans no " + kind + " release");
            }
            double z = cfg.sumNoiseScale / Accounting.gaussianSensitivity(cfg.clipNorm, cfg.numQueries);
            if (z < zFloor * (1 - 1e-12) || (mechanism != null && cfg.sumNoiseScale <= 0)) {
                refuse(cfg, kind + " noise multiplier " + g6(z) + " (σ " + g6(cfg.sumNoiseScale) + ", clip norm "
                        + g6(cfg.clipNorm) + ") is below the declared privacy plan's " + g6(zFloor));
            }
            return;
        }
        if (cells) {
            refuse(cfg, "a cell table is released with the Gaussian mechanism only");
        }
        if (environment && minEnvNoiseMultiplier > 0) {
            double b = Math.min(cfg.sumNoiseScale, cfg.sqSumNoiseScale);
            double z = b / Accounting.laplaceVectorSensitivity(envL1Bound, cfg.numQueries);
            if (z < minEnvNoiseMultiplier * (1 - 1e-12) || (mechanism != null && b <= 0)) {
                refuse(cfg, "environment noise multiplier " + g6(z) + " (scales " + g6(cfg.sumNoiseScale) + " / "
                        + g6(cfg.sqSumNoiseScale) + ") is below the declared privacy plan's "
                        + g6(minEnvNoiseMultiplier));
            }
            return;
        }
        if (cfg.sumNoiseScale < minSumNoiseScale * (1 - 1e-12)) {
            refuse(cfg, "noise scale " + g6(cfg.sumNoiseScale) + " on Σ D is below the declared privacy plan's "
                    + g6(minSumNoiseScale));
        }
        if (cfg.sqSumNoiseScale < minSqSumNoiseScale * (1 - 1e-12)) {
            refuse(cfg, "noise scale " + g6(cfg.sqSumNoiseScale) + " on Σ D² is below the declared privacy plan's "
                    + g6(minSqSumNoiseScale));
        }
    }

    private static void refuse(RoundConfig cfg, String reason) throws SecAggException {
        throw SecAggException.protocol("round " + cfg.roundId + ": " + reason + "; refusing to take part");
    }

    /** Python's {@code format(v, ".6g")} (and {@code "g"}). */
    public static String g6(double v) {
        return g(v, 6);
    }

    /** Python's {@code format(v, ".Ng")}: N significant digits, trailing zeros dropped, an exponent outside
     * [-4, N) written e±XX. */
    public static String g(double v, int digits) {
        if (Double.isNaN(v)) {
            return "nan";
        }
        if (Double.isInfinite(v)) {
            return v > 0 ? "inf" : "-inf";
        }
        if (v == 0) {
            return (1 / v < 0) ? "-0" : "0";
        }
        BigDecimal d = new BigDecimal(v).round(new MathContext(digits, RoundingMode.HALF_EVEN));
        int exp = d.precision() - d.scale() - 1;
        if (exp >= -4 && exp < digits) {
            return d.stripTrailingZeros().toPlainString();
        }
        String figures = d.unscaledValue().abs().toString().replaceAll("0+$", "");
        String mantissa = figures.length() > 1 ? figures.charAt(0) + "." + figures.substring(1) : figures;
        return (d.signum() < 0 ? "-" : "") + mantissa + "e" + (exp < 0 ? "-" : "+")
                + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    }
}
