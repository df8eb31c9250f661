package org.pategail.core.secagg;

import java.util.ArrayList;
import java.util.List;

import org.json.JSONException;
import org.json.JSONObject;

/**
 * The releases a device took part in and the ε they compose to — pure functions (the Python SDK's
 * {@code pategail.sdk.accounting}, with dp-accounting's accountants).
 *
 * <p>As the Python SDK: a list of Laplace releases alone is composed with dp-accounting's PLD accountant
 * ({@link Pld}: each sum of each entry a Laplace event of noise multiplier scale / sensitivity, composed
 * {@code count} times, pessimistic estimate on the caller's grid); a list holding a Gaussian release with its
 * RDP accountant: its default orders, the Gaussian curve α / (2z²) (Mironov 2017, Proposition 7) at the noise
 * multiplier of the release's zCDP ρ, the Laplace curve of Mironov 2017, Proposition 6, and the RDP to (ε, δ)
 * conversion of Canonne, Kamath, Steinke 2020 (Proposition 12 in v4 of arXiv:2004.00010). Both give the
 * Python SDK's figures to 1e-9 on the shared vectors.
 */
public final class Accounting {
    /** Quanta of one value unit in the secure aggregation's fixed point. */
    static final double QUANTA_PER_UNIT = FixedPoint.SCALE;
    /** dp-accounting's {@code DEFAULT_RDP_ORDERS}: 1 + x/10 for x in 1..99, 11..63, 128, 256, 512, 1024. */
    static final double[] ORDERS = defaultOrders();

    private Accounting() {
    }

    private static double[] defaultOrders() {
        double[] out = new double[99 + 53 + 4];
        int k = 0;
        for (int x = 1; x < 100; x++) {
            out[k++] = 1 + x / 10.0;
        }
        for (int a = 11; a < 64; a++) {
            out[k++] = a;
        }
        for (int a : new int[]{128, 256, 512, 1024}) {
            out[k++] = a;
        }
        return out;
    }

    /**
     * One entry of a ledger: {@code count} Laplace queries (Σ D with scale {@code sumScale} and, when
     * {@code sqSumScale} > 0, Σ D² with that scale; sensitivity 1) or {@code count} vector releases of the
     * distributed discrete Gaussian mechanism ({@code shares} devices' shares of total standard deviation
     * {@code noiseStd}, L2 sensitivity {@code sensitivity}, value units).
     */
    public static final class Release {
        public final boolean gaussian;
        public final double sumScale;
        /** 0: no Σ D² release (Python's None). */
        public final double sqSumScale;
        public final double noiseStd;
        public final double sensitivity;
        public final int shares;
        public final long count;

        private Release(boolean gaussian, double sumScale, double sqSumScale, double noiseStd, double sensitivity,
                        int shares, long count) {
            this.gaussian = gaussian;
            this.sumScale = sumScale;
            this.sqSumScale = sqSumScale;
            this.noiseStd = noiseStd;
            this.sensitivity = sensitivity;
            this.shares = shares;
            this.count = count;
            if (count < 1 || shares < 1) {
                throw new IllegalArgumentException("count and shares must be >= 1");
            }
            if (gaussian ? !(noiseStd > 0 && sensitivity > 0) : !(sumScale > 0 && sqSumScale >= 0)) {
                throw new IllegalArgumentException("noise must be > 0 (a release without noise has ε = ∞)");
            }
        }

        public static Release laplace(double sumScale, double sqSumScale, long count) {
            return new Release(false, sumScale, sqSumScale, 0, 0, 1, count);
        }

        public static Release gaussian(double noiseStd, double sensitivity, long count, int shares) {
            return new Release(true, 0, 0, noiseStd, sensitivity, shares, count);
        }

        Release withCount(long n) {
            return new Release(gaussian, sumScale, sqSumScale, noiseStd, sensitivity, shares, n);
        }

        boolean sameNoise(Release o) {
            return gaussian == o.gaussian && sumScale == o.sumScale && sqSumScale == o.sqSumScale
                    && noiseStd == o.noiseStd && sensitivity == o.sensitivity && shares == o.shares;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Release && sameNoise((Release) o) && count == ((Release) o).count;
        }

        @Override
        public int hashCode() {
            return java.util.Arrays.hashCode(new double[]{sumScale, sqSumScale, noiseStd, sensitivity, shares, count,
                gaussian ? 1 : 0});
        }

        /** zCDP ρ of one Gaussian release: ½ (Δ²/σ² + τ/2) (Kairouz, Liu, Steinke 2021, Theorem 2). */
        public double rho() {
            double tau = discreteGaussianTau(noiseStd * QUANTA_PER_UNIT / Math.sqrt(shares), shares);
            double r = sensitivity / noiseStd;
            return 0.5 * (r * r + 0.5 * tau);
        }

        /** The continuous Gaussian's noise multiplier of the same ρ: 1 / sqrt(2ρ). */
        public double noiseMultiplier() {
            return 1.0 / Math.sqrt(2.0 * rho());
        }

        /** The Python SDK's {@code release_to_dict}. */
        public JSONObject toJson() throws JSONException {
            JSONObject o = new JSONObject();
            if (gaussian) {
                return o.put("kind", "gaussian").put("noise_std", noiseStd).put("sensitivity", sensitivity)
                        .put("count", count).put("shares", shares);
            }
            return o.put("sum_scale", sumScale).put("sq_sum_scale", sqSumScale > 0 ? (Object) sqSumScale
                    : JSONObject.NULL).put("count", count);
        }

        /** The Python SDK's {@code release_from_dict}. */
        public static Release fromJson(JSONObject o) throws JSONException {
            if ("gaussian".equals(o.optString("kind", ""))) {
                return gaussian(o.getDouble("noise_std"), o.getDouble("sensitivity"), o.getLong("count"),
                        o.optInt("shares", 1));
            }
            double sq = o.isNull("sq_sum_scale") ? 0.0 : o.getDouble("sq_sum_scale");
            if (!o.isNull("sq_sum_scale") && !(sq > 0)) {
                throw new JSONException("sq_sum_scale must be > 0 or null");
            }
            return laplace(o.getDouble("sum_scale"), sq, o.getLong("count"));
        }
    }

    /** τ = 10 Σ_{k=1}^{n-1} exp(-2π² s² k/(k+1)) for n shares of N_Z(0, s²), s in quanta. */
    public static double discreteGaussianTau(double shareStdQuanta, int shares) {
        double s2 = shareStdQuanta * shareStdQuanta;
        double sum = 0;
        for (int k = 1; k < shares; k++) {
            sum += Math.exp(-2 * (Math.PI * Math.PI) * s2 * k / (k + 1));
        }
        return 10.0 * sum;
    }

    /** L2 sensitivity of a vector of {@code values} entries clipped to {@code clipNorm}: C + ½·√values quanta. */
    public static double gaussianSensitivity(double clipNorm, int values) {
        return clipNorm + 0.5 * Math.sqrt(values) / QUANTA_PER_UNIT;
    }

    /** L1 sensitivity of a Laplace environment upload (x and x²) of L1 bound {@code l1Bound}. */
    public static double laplaceVectorSensitivity(double l1Bound, int values) {
        return 2.0 * l1Bound + values / QUANTA_PER_UNIT;
    }

    /** One Laplace vector query: both halves as one Laplace mechanism at the smaller scale, b / Δ₁. */
    public static Release laplaceVectorRelease(double sumScale, double sqSumScale, double sensitivity) {
        return Release.laplace(Math.min(sumScale, sqSumScale) / sensitivity, 0.0, 1);
    }

    /** {@code releases} + {@code added}, merged into the last entry when it has the same noise. */
    public static List<Release> merge(List<Release> releases, Release added) {
        List<Release> out = new ArrayList<>(releases);
        Release last = out.isEmpty() ? null : out.get(out.size() - 1);
        if (last != null && last.sameNoise(added)) {
            out.set(out.size() - 1, added.withCount(last.count + added.count));
        } else {
            out.add(added);
        }
        return out;
    }

    public static boolean anyGaussian(List<Release> releases) {
        for (Release r : releases) {
            if (r.gaussian) {
                return true;
            }
        }
        return false;
    }

    /** RDP of the Laplace mechanism of pure ε at order a (Mironov 2017, Proposition 6; dp-accounting's). */
    static double laplaceRdp(double eps, double a) {
        if (a == 1) {
            return eps + Math.expm1(-eps);
        }
        if (a < 1.1) {          // not reached by the default orders (the smallest is 1.1); dp-accounting's series
            double c = Math.expm1(eps * (1 - 2 * a)) / (2 * a - 1);
            double v = -c * (a - 1);
            double sum = 0;
            for (int k = 99; k >= 1; k--) {
                sum += Math.pow(v, k - 1) / k;
            }
            return eps + c * sum;
        }
        return eps + Math.log1p((a - 1) * Math.expm1(eps * (1 - 2 * a)) / (2 * a - 1)) / (a - 1);
    }

    /** The RDP curve of {@code releases} at {@link #ORDERS}, composed in the order dp-accounting composes them. */
    static double[] rdp(List<Release> releases) {
        double[] out = new double[ORDERS.length];
        for (Release r : releases) {
            if (r.gaussian) {
                double z = r.noiseMultiplier();
                for (int i = 0; i < ORDERS.length; i++) {
                    out[i] += r.count * (ORDERS[i] / (2 * (z * z)));
                }
                continue;
            }
            for (double scale : new double[]{r.sumScale, r.sqSumScale}) {
                if (scale > 0) {
                    double eps = 1 / scale;
                    for (int i = 0; i < ORDERS.length; i++) {
                        out[i] += r.count * laplaceRdp(eps, ORDERS[i]);
                    }
                }
            }
        }
        return out;
    }

    /** dp-accounting's {@code compute_epsilon}: the smallest ε over the orders at which the curve is (ε, δ)-DP. */
    static double rdpEpsilon(double[] rdp, double delta) {
        double best = Double.POSITIVE_INFINITY;
        for (int i = 0; i < ORDERS.length; i++) {
            double a = ORDERS[i], r = rdp[i], eps;
            if (r < 0) {
                eps = 0.0;
            } else if (delta * delta + Math.expm1(-r) > 0) {
                eps = 0.0;
            } else if (a > 1.01) {
                eps = r + Math.log1p(-1 / a) - Math.log(delta * a) / (a - 1);
            } else {
                eps = Double.POSITIVE_INFINITY;
            }
            if (eps < best) {
                best = eps;
            }
        }
        return Math.max(0, best);
    }

    /**
     * The ε at {@code delta} of the composition of {@code releases} on the PLD grid {@code interval}, as the
     * Python SDK's {@code composed_epsilon} gives it: the PLD accountant for Laplace releases alone, the RDP
     * accountant as soon as a Gaussian release is among them. 0 for none.
     */
    public static double composedEpsilon(List<Release> releases, double delta, double interval) {
        if (releases.isEmpty()) {
            return 0.0;
        }
        if (anyGaussian(releases)) {
            return rdpEpsilon(rdp(releases), delta);
        }
        // a long ledger composes in seconds; a device's request check, round check and record ask for the same one
        // (from separate ledger objects), so the last few are kept, as the Python SDK keeps them
        List<Object> key = java.util.Arrays.asList(new ArrayList<>(releases), delta, interval);
        synchronized (CACHE) {
            Double hit = CACHE.get(key);
            if (hit != null) {
                return hit;
            }
        }
        double eps = composedPld(releases, interval).epsilonForDelta(delta);
        synchronized (CACHE) {
            CACHE.put(key, eps);
        }
        return eps;
    }

    private static final java.util.Map<List<Object>, Double> CACHE =
            new java.util.LinkedHashMap<List<Object>, Double>(16, 0.75f, true) {
                @Override
                protected boolean removeEldestEntry(java.util.Map.Entry<List<Object>, Double> eldest) {
                    return size() > 16;
                }
            };

    /** dp-accounting's RDP accountant's ε for any list (for a Laplace-only one an upper bound on the PLD's). */
    public static double rdpEpsilon(List<Release> releases, double delta) {
        return releases.isEmpty() ? 0.0 : rdpEpsilon(rdp(releases), delta);
    }

    /**
     * The PLD accountant's distribution of a Laplace-only list, composed as dp-accounting's
     * {@code PLDAccountant} composes the SDK's events: from the identity, each sum of each entry (Σ D, then Σ D²)
     * as the Laplace PLD of its scale composed {@code count} times, composed in order.
     */
    public static Pld composedPld(List<Release> releases, double interval) {
        Pld pld = Pld.identity(interval);
        Pld last = null;
        double lastScale = 0;
        long lastCount = 0;
        for (Release r : releases) {
            if (r.gaussian) {
                throw new IllegalArgumentException("a Gaussian release is composed with the RDP accountant");
            }
            for (double scale : new double[]{r.sumScale, r.sqSumScale}) {
                if (scale > 0) {
                    if (last == null || scale != lastScale || r.count != lastCount) {   // Σ D² at Σ D's: reused
                        last = Pld.laplace(scale, interval).selfCompose(r.count);
                        lastScale = scale;
                        lastCount = r.count;
                    }
                    pld = pld.compose(last);
                }
            }
        }
        return pld;
    }
}
