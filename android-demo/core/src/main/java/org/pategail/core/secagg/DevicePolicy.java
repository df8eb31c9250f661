package org.pategail.core.secagg;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

import org.json.JSONException;
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
 * <li>an environment round whose noise multiplier — the smaller scale over the release's L1 sensitivity
 * 2·L1 bound + M quanta — is below the plan's environment multiplier (when the plan declares one);</li>
 * <li>otherwise, a noise scale on Σ D or Σ D² below the plan's.</li>
 * </ul>
 * The refusal is one line, word for word the Python device's, as a protocol error before anything is sent.
 */
public final class DevicePolicy {
    /** No plan: only the secure threshold. */
    public static final DevicePolicy NONE = new DevicePolicy(0, 0, 0, 0, null, 0);

    public final double minSurvivorShare;
    public final double minSumNoiseScale;
    public final double minSqSumNoiseScale;
    public final int minColluders;
    /** "laplace" or "gaussian" (the plan's); null: any. */
    public final String mechanism;
    public final double minEnvNoiseMultiplier;

    public DevicePolicy(double minSurvivorShare, double minSumNoiseScale, double minSqSumNoiseScale, int minColluders,
                        String mechanism, double minEnvNoiseMultiplier) {
        this.minSurvivorShare = minSurvivorShare;
        this.minSumNoiseScale = minSumNoiseScale;
        this.minSqSumNoiseScale = minSqSumNoiseScale;
        this.minColluders = minColluders;
        this.mechanism = mechanism;
        this.minEnvNoiseMultiplier = minEnvNoiseMultiplier;
    }

    /**
     * The floors a declared plan implies (the Python SDK's {@code DeclaredPlan.policy}); IllegalArgumentException
     * naming what is wrong when the section is not a valid plan (the Python SDK's checks).
     */
    public static DevicePolicy fromPlan(JSONObject plan) {
        try {
            double eps = plan.getDouble("target_epsilon"), delta = plan.getDouble("target_delta");
            double sum = plan.getDouble("sum_noise_scale"), sq = plan.getDouble("sq_sum_noise_scale");
            double share = plan.getDouble("min_survivors");
            int colluders = plan.optInt("colluders", 0);
            String mechanism = plan.optString("mechanism", "laplace");
            double z = plan.optDouble("noise_multiplier", 0.0), zEnv = plan.optDouble("env_noise_multiplier", 0.0);
            boolean noise = "gaussian".equals(mechanism) ? z > 0 && zEnv > 0
                    : "laplace".equals(mechanism) && sum > 0 && sq > 0;
            if (!(eps > 0 && delta > 0 && delta < 1 && noise && share > 0 && share <= 1 && colluders >= 0)) {
                throw new IllegalArgumentException("need target_epsilon > 0, 0 < target_delta < 1, noise scales "
                        + "(Laplace) or noise multipliers (Gaussian) > 0, min_survivors in (0, 1], colluders >= 0");
            }
            return new DevicePolicy(share, sum, sq, colluders, mechanism, zEnv);
        } catch (JSONException err) {
            throw new IllegalArgumentException(err.getMessage());
        }
    }

    /**
     * SecAggException (protocol) naming the first floor {@code cfg} is below; {@code environment}: the round would
     * upload the device's environment vector, of L1 bound {@code envL1Bound}.
     */
    public void check(RoundConfig cfg, boolean environment, double envL1Bound) throws SecAggException {
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
        if (mechanism != null && !"laplace".equals(mechanism)) {     // this core parses Laplace rounds only
            refuse(cfg, "a laplace round, the declared privacy plan's mechanism is " + mechanism);
        }
        if (environment && minEnvNoiseMultiplier > 0) {
            double b = Math.min(cfg.sumNoiseScale, cfg.sqSumNoiseScale);
            double z = b / (2.0 * envL1Bound + (double) cfg.numQueries / FixedPoint.SCALE);
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

    /** Python's {@code format(v, ".6g")}: 6 significant digits, trailing zeros dropped, an exponent outside
     * [-4, 6) written e±XX. */
    static String g6(double v) {
        if (Double.isNaN(v)) {
            return "nan";
        }
        if (Double.isInfinite(v)) {
            return v > 0 ? "inf" : "-inf";
        }
        if (v == 0) {
            return (1 / v < 0) ? "-0" : "0";
        }
        BigDecimal d = new BigDecimal(v).round(new MathContext(6, RoundingMode.HALF_EVEN));
        int exp = d.precision() - d.scale() - 1;
        if (exp >= -4 && exp < 6) {
            return d.stripTrailingZeros().toPlainString();
        }
        String digits = d.unscaledValue().abs().toString().replaceAll("0+$", "");
        String mantissa = digits.length() > 1 ? digits.charAt(0) + "." + digits.substring(1) : digits;
        return (d.signum() < 0 ? "-" : "") + mantissa + "e" + (exp < 0 ? "-" : "+")
                + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    }
}
