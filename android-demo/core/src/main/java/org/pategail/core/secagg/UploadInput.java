package org.pategail.core.secagg;

/**
 * What a device releases in a round, from its pending vector (the Python SDK's {@code secagg.client}
 * functions {@code input_length}, {@code gaussian_input} and {@code laplace_environment_input}, with
 * {@code contribution.Granularity}): the clipping that makes the sensitivity the accountant assumes hold on the
 * device, whatever the coordinator does with the sum.
 */
public final class UploadInput {
    /** Decisions of a generated day (slots - 1): the per-decision scores of a day. */
    public static final int DECISIONS = 47;

    private UploadInput() {
    }

    /** Released values per generated day at {@code block} decisions per value (the day's last block may be
     * shorter). */
    public static int blocksPerDay(int block) {
        return (DECISIONS + block - 1) / block;
    }

    /**
     * The length the pending vector must have for round {@code cfg}: M, or for a Gaussian round over blocks of
     * K decisions, 47 scores per generated day ({@code pending} says how many days it scored).
     */
    public static int inputLength(RoundConfig cfg, int pending) {
        if (cfg.isGaussian() && cfg.block != 0 && cfg.block != RoundConfig.DELTA_BLOCK) {
            int days = pending / DECISIONS;
            if (pending % DECISIONS == 0 && days * blocksPerDay(cfg.block) == cfg.numQueries) {
                return pending;
            }
            return cfg.numQueries / blocksPerDay(cfg.block) * DECISIONS;
        }
        return cfg.numQueries;
    }

    /** The mean of per-decision {@code values} (days x 47, day-major) over each block of {@code block}
     * decisions of a day: days x blocksPerDay values. */
    public static double[] blockMeans(double[] values, int block) {
        int days = values.length / DECISIONS, per = blocksPerDay(block);
        double[] sums = new double[days * per];
        for (int d = 0; d < days; d++) {
            for (int j = 0; j < DECISIONS; j++) {
                sums[d * per + j / block] += values[d * DECISIONS + j];
            }
        }
        for (int d = 0; d < days; d++) {
            for (int k = 0; k < per; k++) {
                int count = Math.min(block, DECISIONS - k * block);
                sums[d * per + k] /= count;
            }
        }
        return sums;
    }

    /**
     * What a device releases in a Gaussian round: its values clipped to [0, 1] (block 0), or its centred scores
     * D - 1/2 averaged over blocks of {@code cfg.block} decisions, or (block {@link RoundConfig#DELTA_BLOCK}) a
     * signed vector clipped to [-1, 1]; then scaled down to L2 norm {@code cfg.clipNorm} when longer.
     */
    public static double[] gaussianInput(double[] values, RoundConfig cfg) {
        double[] v;
        if (cfg.block == RoundConfig.DELTA_BLOCK) {
            v = FixedPoint.clipSigned(values);
        } else {
            v = FixedPoint.clipUnit(values);
            if (cfg.block != 0) {
                for (int i = 0; i < v.length; i++) {
                    v[i] -= 0.5;
                }
                v = blockMeans(v, cfg.block);
            }
        }
        double squares = 0;
        for (double x : v) {
            squares += x * x;
        }
        double norm = Math.sqrt(squares);
        if (norm > cfg.clipNorm) {
            double s = cfg.clipNorm / norm;
            for (int i = 0; i < v.length; i++) {
                v[i] *= s;
            }
        }
        return v;
    }

    /**
     * What a device releases in a Laplace-mechanism environment round: its vector clipped to [0, 1], scaled
     * down to L1 norm {@code l1Bound} when longer (a no-op for honest vectors).
     */
    public static double[] laplaceEnvironmentInput(double[] values, double l1Bound) {
        double[] v = FixedPoint.clipUnit(values);
        double norm = 0;
        for (double x : v) {
            norm += x;
        }
        if (norm > l1Bound) {
            double s = l1Bound / norm;
            for (int i = 0; i < v.length; i++) {
                v[i] *= s;
            }
        }
        return v;
    }
}
