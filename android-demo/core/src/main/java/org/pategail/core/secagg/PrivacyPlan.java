package org.pategail.core.secagg;

import org.json.JSONException;
import org.json.JSONObject;

/**
 * The privacy plan a model bundle declares (its manifest's "privacy" section; the Python SDK's
 * {@code DeclaredPlan}): what every device of the run may expect, so it can refuse less ({@link #policy}) and
 * keep its own budget ({@link #targetEpsilon} at {@link #targetDelta}, checked by {@link PrivacyLedger}).
 */
public final class PrivacyPlan {
    public final double targetEpsilon;
    public final double targetDelta;
    /** Laplace: the total noise scale on each Σ D (value units); 0 for the Gaussian mechanism. */
    public final double sumNoiseScale;
    /** Laplace: the same for each Σ D². */
    public final double sqSumNoiseScale;
    /** n_min as a share of the devices asked. */
    public final double minSurvivors;
    /** t of the threat model: noise shares sized for n_min - t. */
    public final int colluders;
    /** "laplace" or "gaussian". */
    public final String mechanism;
    /** Gaussian: σ / Δ₂ of every reward release. */
    public final double noiseMultiplier;
    /** σ / Δ₂ of the environment release (Gaussian); b / Δ₁ (Laplace, one vector query; 0: none declared). */
    public final double envNoiseMultiplier;
    /**
     * σ / Δ₂ of the release of the visited squares a run that releases its cell table makes first (Gaussian; 0:
     * none). The bundle on the public map that precedes that release declares it alone (its reward and
     * environment multipliers 0: no other release is planned under it); the run's bundles declare it with the rest.
     */
    public final double cellsNoiseMultiplier;

    private PrivacyPlan(double targetEpsilon, double targetDelta, double sumNoiseScale, double sqSumNoiseScale,
                        double minSurvivors, int colluders, String mechanism, double noiseMultiplier,
                        double envNoiseMultiplier, double cellsNoiseMultiplier) {
        // Gaussian: a run's plan, or the plan of a bundle on the public map that plans the cell-table release only
        boolean gaussianNoise = cellsNoiseMultiplier >= 0 && (Math.min(noiseMultiplier, envNoiseMultiplier) > 0
                || (Math.max(noiseMultiplier, envNoiseMultiplier) == 0 && cellsNoiseMultiplier > 0));
        boolean noise = "gaussian".equals(mechanism) ? gaussianNoise
                : "laplace".equals(mechanism) && sumNoiseScale > 0 && sqSumNoiseScale > 0;
        if (!(targetEpsilon > 0 && targetDelta > 0 && targetDelta < 1 && noise && minSurvivors > 0
                && minSurvivors <= 1 && colluders >= 0)) {
            throw new IllegalArgumentException("need target_epsilon > 0, 0 < target_delta < 1, noise scales "
                    + "(Laplace) or noise multipliers (Gaussian) > 0, min_survivors in (0, 1], colluders >= 0");
        }
        this.targetEpsilon = targetEpsilon;
        this.targetDelta = targetDelta;
        this.sumNoiseScale = sumNoiseScale;
        this.sqSumNoiseScale = sqSumNoiseScale;
        this.minSurvivors = minSurvivors;
        this.colluders = colluders;
        this.mechanism = mechanism;
        this.noiseMultiplier = noiseMultiplier;
        this.envNoiseMultiplier = envNoiseMultiplier;
        this.cellsNoiseMultiplier = cellsNoiseMultiplier;
    }

    /** Parse the manifest's section; IllegalArgumentException naming what is wrong when malformed. */
    public static PrivacyPlan fromManifest(JSONObject plan) {
        try {
            return new PrivacyPlan(plan.getDouble("target_epsilon"), plan.getDouble("target_delta"),
                    plan.getDouble("sum_noise_scale"), plan.getDouble("sq_sum_noise_scale"),
                    plan.getDouble("min_survivors"), plan.optInt("colluders", 0),
                    plan.optString("mechanism", "laplace"), plan.optDouble("noise_multiplier", 0.0),
                    plan.optDouble("env_noise_multiplier", 0.0), plan.optDouble("cells_noise_multiplier", 0.0));
        } catch (JSONException err) {
            throw new IllegalArgumentException(err.getMessage());
        }
    }

    public boolean isGaussian() {
        return "gaussian".equals(mechanism);
    }

    /** The floors this plan implies for every signed round configuration. */
    public DevicePolicy policy() {
        return new DevicePolicy(minSurvivors, sumNoiseScale, sqSumNoiseScale, colluders, mechanism, noiseMultiplier,
                envNoiseMultiplier, cellsNoiseMultiplier);
    }

    /** What answering a request of {@code values} values costs at this plan's noise (the device's budget check
     * before it prepares anything). */
    public Accounting.Release requestRelease(int values, boolean environment) {
        return requestRelease(values, environment, false);
    }

    /** The same; {@code cells}: the cell-table release (Gaussian, one vector). IllegalArgumentException when the
     * plan plans no noise for the release asked for. */
    public Accounting.Release requestRelease(int values, boolean environment, boolean cells) {
        if (cells) {
            if (cellsNoiseMultiplier <= 0) {
                throw new IllegalArgumentException("the plan releases no cell table");
            }
            return Accounting.Release.gaussian(cellsNoiseMultiplier, 1.0, 1, 1);
        }
        if (isGaussian()) {
            double z = environment ? envNoiseMultiplier : noiseMultiplier;
            if (z <= 0) {        // the plan of a bundle on a public map plans the cell-table release alone
                throw new IllegalArgumentException("the plan plans no " + (environment ? "environment" : "reward")
                        + " release");
            }
            return Accounting.Release.gaussian(z, 1.0, 1, 1);
        }
        if (environment && envNoiseMultiplier > 0) {
            return Accounting.Release.laplace(envNoiseMultiplier, 0.0, 1);
        }
        return Accounting.Release.laplace(sumNoiseScale, sqSumNoiseScale, values);
    }
}
