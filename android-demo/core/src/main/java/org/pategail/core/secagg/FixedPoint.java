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
        double[] out = new double[values.length];
        for (int i = 0; i < values.length; i++) {
            double v = values[i];
            if (Double.isNaN(v) || Double.isInfinite(v)) {
                throw new IllegalArgumentException("scores must be finite");
            }
            out[i] = Math.min(1.0, Math.max(0.0, v));
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

    /** Signed quanta to value units. */
    public static double decode(long quanta) {
        return (double) quanta / SCALE;
    }

    /** An upper bound on |Σ (x_u + noise_u)| over n devices failing with probability below 2^-tailLog2
     * (the same Chernoff bound as the Python SDK's {@code sum_bound}). */
    public static double sumBound(int nDevices, double noiseScaleQuanta, int nMin, double tailLog2) {
        double data = (double) nDevices * SCALE;
        if (noiseScaleQuanta <= 0) {
            return data;
        }
        double a = 1.0 / noiseScaleQuanta;
        double r = (double) nDevices / nMin;
        double logMgf = r * (Math.log(-Math.expm1(-a)) - Math.log(-Math.expm1(-a / 2)));
        double t = 2.0 * (logMgf + (tailLog2 + 1) * Math.log(2)) / a;
        return data + t;
    }
}
