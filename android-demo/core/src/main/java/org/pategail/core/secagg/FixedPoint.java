package org.pategail.core.secagg;

/**
 * Fixed-point encoding of scores in Z_2^64 (the Python SDK's {@code fixedpoint.py}): a score is clipped to
 * [0, 1] and encoded as round-half-even(v * 2^24); sums are read back as signed 64-bit integers.
 */
public final class FixedPoint {
    public static final int FRAC_BITS = 24;
    public static final long SCALE = 1L << FRAC_BITS;
    public static final int MAX_DEVICES = 100_000;
    public static final double MAX_NOISE_SCALE_QUANTA = Math.pow(2, 50);
    public static final double SAFE_ABS_SUM = Math.pow(2, 60);

    private FixedPoint() {
    }

    /** Scores clipped to [0, 1]; NaN or infinity is an error, never silently zeroed. */
    public static double[] clipUnit(double[] values) {
        return clip(values, 0.0, "scores must be finite");
    }

    private static double[] clip(double[] values, double lo, String nonFinite) {
        double[] out = new double[values.length];
        for (int i = 0; i < values.length; i++) {
            double v = values[i];
            if (Double.isNaN(v) || Double.isInfinite(v)) {
                throw new IllegalArgumentException(nonFinite);
            }
            out[i] = Math.min(1.0, Math.max(lo, v));
        }
        return out;
    }

    /** Clip to [0, 1] and encode as quanta in [0, 2^24], rounding half to even (numpy's rint). */
    public static long[] encode(double[] values) {
        double[] v = clipUnit(values);
        long[] out = new long[v.length];
        for (int i = 0; i < v.length; i++) {
            out[i] = (long) Math.rint(v[i] * SCALE);
        }
        return out;
    }

    /** Values clipped to [-1, 1] (a signed vector: a scaled model delta); NaN or infinity is an error. */
    public static double[] clipSigned(double[] values) {
        return clip(values, -1.0, "values must be finite");
    }

    /** Values already bounded by the caller (centred, clipped) as quanta, rounded half to even. */
    public static long[] encodeSigned(double[] values) {
        long[] out = new long[values.length];
        for (int i = 0; i < values.length; i++) {
            double v = values[i];
            if (Double.isNaN(v) || Double.isInfinite(v) || Math.abs(v) > 1.0) {
                throw new IllegalArgumentException("values must be finite and within [-1, 1]");
            }
            out[i] = (long) Math.rint(v * SCALE);
        }
        return out;
    }

    /** Signed quanta to value units. */
    public static double decode(long quanta) {
        return (double) quanta / SCALE;
    }

    /** An upper bound on |Σ (x_u + noise_u)| over n devices failing with probability below 2^-tailLog2
     * (the same Chernoff bound as the Python SDK's {@code sum_bound}). */
    public static double sumBound(int nDevices, double noiseScaleQuanta, int nMin, double tailLog2) {
        return (double) nDevices * SCALE + noiseBound(nDevices, noiseScaleQuanta, nMin, tailLog2);
    }

    /** A bound on |Σ noise| over n devices' discrete-Laplace shares, exceeded with probability below
     * 2^-tailLog2 (Chernoff at θ = a/2; the Python SDK's {@code noise_bound}). */
    public static double noiseBound(int nDevices, double noiseScaleQuanta, int noiseDivisor, double tailLog2) {
        if (noiseScaleQuanta <= 0) {
            return 0.0;
        }
        double a = 1.0 / noiseScaleQuanta;
        double r = (double) nDevices / noiseDivisor;
        double logMgf = r * (Math.log(-Math.expm1(-a)) - Math.log(-Math.expm1(-a / 2)));
        return 2.0 * (logMgf + (tailLog2 + 1) * Math.log(2)) / a;
    }

    /** The same for discrete-Gaussian shares N_Z(0, s²/d): N_Z(0, v) is v-subgaussian (Canonne, Kamath, Steinke
     * 2020), so P(|Σ| >= T) <= 2 exp(-T² d / (2 n s²)) (the Python SDK's {@code gaussian_noise_bound}). */
    public static double gaussianNoiseBound(int nDevices, double noiseStdQuanta, int noiseDivisor, double tailLog2) {
        if (noiseStdQuanta <= 0) {
            return 0.0;
        }
        double variance = (double) nDevices / noiseDivisor * (noiseStdQuanta * noiseStdQuanta);
        return Math.sqrt(2.0 * variance * (tailLog2 + 1) * Math.log(2));
    }

    /** {@link #noiseBound} or {@link #gaussianNoiseBound}, by the round's mechanism. */
    public static double mechanismNoiseBound(String mechanism, int nDevices, double scaleQuanta, int noiseDivisor,
                                             double tailLog2) {
        return "gaussian".equals(mechanism) ? gaussianNoiseBound(nDevices, scaleQuanta, noiseDivisor, tailLog2)
                : noiseBound(nDevices, scaleQuanta, noiseDivisor, tailLog2);
    }
}
