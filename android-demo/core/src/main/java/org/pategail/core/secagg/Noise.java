package org.pategail.core.secagg;

import java.security.SecureRandom;

/**
 * One device's share of distributed discrete-Laplace noise (the Python SDK's {@code noise.py}): n_min devices
 * each adding NB(1/n_min, p) - NB(1/n_min, p), p = 1 - e^(-a), a = 1/scale, sum to exactly DLap(a).
 *
 * <p>NB(r, p) is drawn as compound Poisson: N ~ Poisson(-r ln p) logarithmic draws Log(e^(-a)), Poisson by
 * inversion of its CDF table, the logarithmic law by Kemp's LS algorithm. Uniforms (53 bits) come from the
 * platform CSPRNG ({@link SecureRandom}), never from a seeded generator: noise must be unpredictable even to
 * someone who knows every seed of the experiment.
 *
 * <p>The Gaussian mechanism's share (Kairouz, Liu, Steinke 2021): each of the d = n_min - t honest shares is
 * N_Z(0, σ²/d), drawn by Canonne, Kamath and Steinke's rejection sampler (2020, Algorithm 3) as the Python SDK
 * draws it: a discrete-Laplace proposal of scale ⌊s⌋ + 1 (a difference of two geometric draws by inversion),
 * accepted with probability exp(-(|Y| - s²/scale)² / (2s²)).
 */
public final class Noise {
    private final SecureRandom random;

    public Noise(SecureRandom random) {
        this.random = random;
    }

    /** A uniform in (0, 1) with 53 random bits. */
    double uniform() {
        return ((random.nextLong() >>> 11) + 0.5) * 0x1.0p-53;
    }

    /** Poisson(mu) by CDF inversion (mu is small: at most ~36 for the scales a round may ask for). */
    int poisson(double mu, double[] cdf) {
        if (mu <= 0) {
            return 0;
        }
        double u = uniform();
        int lo = 0, hi = cdf.length;          // first index whose cdf exceeds u (searchsorted, side right)
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (cdf[mid] <= u) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    static double[] poissonCdf(double mu) {
        int kmax = (int) (mu + 14 * Math.sqrt(mu) + 40);
        double[] cdf = new double[kmax + 1];
        double logPmf = -mu;
        double acc = 0;
        for (int k = 0; k <= kmax; k++) {
            if (k > 0) {
                logPmf += Math.log(mu) - Math.log(k);
            }
            acc += Math.exp(logPmf);
            cdf[k] = acc;
        }
        for (int k = 0; k <= kmax; k++) {
            cdf[k] /= acc;
        }
        return cdf;
    }

    /** Log(q), q = e^(-a): P(k) = -q^k / (k ln(1 - q)), k >= 1 (Kemp's LS algorithm). */
    long logarithmic(double a) {
        double log1mq = Math.log(-Math.expm1(-a));
        double v = uniform(), u = uniform();
        if (v >= Math.exp(-a)) {
            return 1;
        }
        double logH = Math.log(-Math.expm1(log1mq * u));
        double h = Math.exp(logH);
        if (v <= h * h) {
            return (long) Math.floor(1.0 + Math.log(v) / logH);
        }
        return v < h ? 2 : 1;
    }

    /** NB(r, 1 - e^(-a)) draws: failures before r successes, as a compound Poisson of logarithmic draws. */
    long[] negativeBinomial(double r, double a, int size) {
        double mu = -r * Math.log(-Math.expm1(-a));
        double[] cdf = poissonCdf(mu);
        long[] out = new long[size];
        for (int i = 0; i < size; i++) {
            int n = poisson(mu, cdf);
            long s = 0;
            for (int k = 0; k < n; k++) {
                s += logarithmic(a);
            }
            out[i] = s;
        }
        return out;
    }

    /** One device's share (size coordinates) of DLap(1/scaleQuanta) split among nMin; zeros for scale 0. */
    public long[] discreteLaplaceShare(double scaleQuanta, int nMin, int size) {
        if (scaleQuanta == 0) {
            return new long[size];
        }
        if (!(scaleQuanta >= 1.0 && scaleQuanta <= FixedPoint.MAX_NOISE_SCALE_QUANTA)) {
            throw new IllegalArgumentException("noise scale " + scaleQuanta + " quanta outside [1, 2^50]");
        }
        if (nMin < 1) {
            throw new IllegalArgumentException("n_min must be at least 1");
        }
        double a = 1.0 / scaleQuanta;
        long[] both = negativeBinomial(1.0 / nMin, a, 2 * size);
        long[] out = new long[size];
        for (int i = 0; i < size; i++) {
            out[i] = both[i] - both[size + i];
        }
        return out;
    }

    /** Failures before a success of probability 1 - e^(-1/scale): ⌊-scale · ln U⌋ (inversion). */
    long geometric(double scale) {
        return (long) Math.floor(-scale * Math.log(uniform()));
    }

    /** One draw of N_Z(0, s²), P(k) ∝ exp(-k²/(2s²)), s = {@code stdQuanta} (Canonne-Kamath-Steinke). */
    long discreteGaussian(double s) {
        double scale = Math.floor(s) + 1.0;
        while (true) {
            long y = geometric(scale) - geometric(scale);
            double d = Math.abs((double) y) - s * s / scale;
            double excess = d * d / (2 * s * s);
            if (uniform() < Math.exp(-excess)) {
                return y;
            }
        }
    }

    /**
     * One device's share (size coordinates) of distributed discrete-Gaussian noise of total standard deviation
     * {@code stdQuanta} split among {@code divisor} honest devices: N_Z(0, std²/divisor) each; zeros for 0.
     */
    public long[] discreteGaussianShare(double stdQuanta, int divisor, int size) {
        if (stdQuanta == 0) {
            return new long[size];
        }
        if (divisor < 1) {
            throw new IllegalArgumentException("n_min must be at least 1");
        }
        if (!(stdQuanta >= 1.0 && stdQuanta <= FixedPoint.MAX_NOISE_SCALE_QUANTA)) {
            throw new IllegalArgumentException("noise std " + stdQuanta + " quanta outside [1, 2^50]");
        }
        double s = stdQuanta / Math.sqrt(divisor);
        long[] out = new long[size];
        for (int i = 0; i < size; i++) {
            out[i] = discreteGaussian(s);
        }
        return out;
    }

    /** The device's noise share of a round of {@code mechanism} ("laplace": total scale; "gaussian": total
     * standard deviation), split among {@code divisor} = n_min - colluders honest devices. */
    public long[] share(String mechanism, double scaleQuanta, int divisor, int size) {
        if ("gaussian".equals(mechanism)) {
            return discreteGaussianShare(scaleQuanta, divisor, size);
        }
        return discreteLaplaceShare(scaleQuanta, divisor, size);
    }
}
