package org.pategail.core.secagg;

/**
 * A privacy-loss distribution on a grid (pessimistic estimate), as dp-accounting's PLD accountant builds and
 * composes it for Laplace events (its {@code pld_pmf.PLDPmf}, {@code privacy_loss_distribution} and
 * {@code LaplacePrivacyLoss}, version 0.6): probability {@code probs[i]} on the privacy loss
 * (lower + i)·interval, plus {@code infinity} on +∞. The same steps in the same order, so the same ε for δ:
 *
 * <ul>
 * <li>{@link #laplace}: the Laplace mechanism of scale b, sensitivity 1, discretised by connect-the-dots
 * (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, Algorithm 1) on the losses ⌊-1/b / interval⌋ ..
 * ⌈1/b / interval⌉ from the mechanism's exact hockey-stick divergence δ(ε);</li>
 * <li>{@link #selfCompose}: n-fold composition: by repeated direct convolution while the support stays small
 * (≤ 1000 points, dp-accounting's sparse form), else by raising the Fourier transform to the n-th power on a
 * window that a Chernoff bound shows holds all but 1e-15 of the mass (that 1e-15 goes to +∞);</li>
 * <li>{@link #compose}: convolution, then truncation of tails of mass ≤ 0.5e-15 each (the left tail to the first
 * kept loss, the right one to +∞);</li>
 * <li>{@link #epsilonForDelta} and {@link #deltaForEpsilon}: the hockey-stick divergence.</li>
 * </ul>
 *
 * <p>Where dp-accounting uses numpy's FFT of a 5-smooth length, this uses a power-of-two length (its
 * {@link Fft}): both keep the same window, and only rounding (and where the ≤ 1e-15 of mass outside the window
 * aliases to) differs. δ(ε) of the Laplace mechanism is evaluated with {@link StrictMath} (the same bits on every
 * JVM); numpy's vectorised {@code exp} differs from the C library's in the last bit for a few per cent of
 * arguments depending on the CPU, and an n-fold composition amplifies such a bit n-fold, so for ledgers of many
 * thousand queries dp-accounting's own ε is reproducible only to ~1e-7 (docs/java-device.md).
 */
public final class Pld {
    /** dp-accounting's {@code _MAX_PMF_SPARSE_SIZE}: up to this many points a PMF is kept in its sparse form. */
    static final int MAX_SPARSE_SIZE = 1000;
    /** dp-accounting's default {@code tail_mass_truncation} of compositions. */
    static final double TAIL_MASS = 1e-15;
    /** dp-accounting's {@code _DELTA_DIFF_TOLERANCE}. */
    private static final double DELTA_DIFF_TOLERANCE = 1e-12;

    public final double interval;
    public final long lower;
    final double[] probs;
    public final double infinity;
    /** dp-accounting's SparsePLDPmf (true) or DensePLDPmf: decides how it composes and how losses are spelled. */
    final boolean sparse;

    Pld(double interval, long lower, double[] probs, double infinity, boolean sparse) {
        this.interval = interval;
        this.lower = lower;
        this.probs = probs;
        this.infinity = infinity;
        this.sparse = sparse;
    }

    /** dp-accounting's {@code create_pmf}: sparse up to {@link #MAX_SPARSE_SIZE} points. */
    static Pld create(double interval, long lower, double[] probs, double infinity) {
        return new Pld(interval, lower, probs, infinity, probs.length <= MAX_SPARSE_SIZE);
    }

    /** The PLD of a mechanism that releases nothing: loss 0 with probability 1. */
    public static Pld identity(double interval) {
        return create(interval, 0, new double[]{1.0}, 0.0);
    }

    public int size() {
        return probs.length;
    }

    /** A copy of the probabilities (index i: loss (lower + i)·interval). */
    public double[] probabilities() {
        return probs.clone();
    }

    // -- the Laplace mechanism ------------------------------------------------------------------------------

    /** Laplace(0, b) noise's CDF at x (scipy's {@code laplace.cdf(x, scale=b)}). */
    static double laplaceCdf(double x, double b) {
        double y = x / b;
        return y > 0 ? 1.0 - 0.5 * StrictMath.exp(-y) : 0.5 * StrictMath.exp(y);
    }

    /**
     * The exact hockey-stick divergence δ(ε) of the Laplace mechanism of scale b and sensitivity 1 (remove
     * adjacency, as dp-accounting's {@code AdditiveNoisePrivacyLoss.get_delta_for_epsilon}): with x the largest
     * point of privacy loss ≥ ε, δ = P[Lap(b) ≤ x + 1] - e^ε P[Lap(b) ≤ x], clipped to [0, 1].
     */
    public static double laplaceDelta(double epsilon, double b) {
        double threshold = epsilon * b;
        double x;
        if (threshold > 1) {
            x = Double.NEGATIVE_INFINITY;
        } else if (threshold <= -1) {
            x = Double.POSITIVE_INFINITY;
        } else {
            x = 0.5 * (-1 - threshold);
        }
        double delta = laplaceCdf(x + 1, b) - StrictMath.exp(epsilon + StrictMath.log(laplaceCdf(x, b)));
        return Math.min(1.0, Math.max(0.0, delta));
    }

    /** dp-accounting's {@code from_laplace_mechanism(b, value_discretization_interval=interval)} (connect the dots). */
    public static Pld laplace(double b, double interval) {
        if (!(b > 0) || !(interval > 0)) {
            throw new IllegalArgumentException("Laplace scale and interval must be > 0");
        }
        double maxEpsilon = 1.0 / b;
        long up = (long) Math.ceil(maxEpsilon / interval);
        long lo = (long) Math.floor(-maxEpsilon / interval);
        long count = up - lo + 1;
        if (count > (1 << 28)) {
            throw new IllegalArgumentException("Laplace scale " + b + " is too small for the interval " + interval);
        }
        double[] deltas = new double[(int) count];
        for (int i = 0; i < deltas.length; i++) {
            deltas[i] = laplaceDelta((double) (lo + i) * interval, b);
        }
        return connectTheDots(interval, lo, deltas);
    }

    /** dp-accounting's {@code create_pmf_pessimistic_connect_dots_fixed_gap}. */
    static Pld connectTheDots(double interval, long lo, double[] deltas) {
        int n = deltas.length;
        if (n == 1) {
            return create(interval, lo, new double[]{1 - deltas[0]}, deltas[0]);
        }
        double[] d = deltas.clone();
        for (int i = 1; i < n; i++) {
            if (d[i] - d[i - 1] > DELTA_DIFF_TOLERANCE) {
                throw new IllegalStateException("deltas are not in non-increasing order");
            }
            d[i] = Math.min(d[i], d[i - 1]);
        }
        double[] diff = new double[n - 1];
        for (int i = 0; i < n - 1; i++) {
            diff[i] = d[i + 1] - d[i];
        }
        double expm1 = Math.expm1(interval), exp = Math.exp(interval);
        double[] probs = new double[n];
        probs[0] = 1 - d[0] + diff[0] / expm1;
        for (int i = 1; i < n - 1; i++) {
            probs[i] = (diff[i] - diff[i - 1] * exp) / expm1;
        }
        probs[n - 1] = diff[n - 2] / Math.expm1(-interval);
        for (int i = 0; i < n; i++) {
            probs[i] = Math.max(0.0, probs[i]);
        }
        return create(interval, lo, probs, d[n - 1]);
    }

    // -- composition ----------------------------------------------------------------------------------------

    /** This PLD composed with {@code other} on the same grid (dp-accounting's {@code compose_pmfs}). */
    public Pld compose(Pld other) {
        return compose(other, TAIL_MASS);
    }

    Pld compose(Pld other, double tailMass) {
        if (other.interval != interval) {
            throw new IllegalArgumentException("discretization intervals are different: " + interval + " != "
                    + other.interval);
        }
        boolean sparseResult = sparse && other.sparse && (long) size() * other.size() <= MAX_SPARSE_SIZE;
        double[] conv = Fft.convolve(probs, other.probs);
        double inf = infinity + other.infinity - infinity * other.infinity;
        return truncated(lower + other.lower, conv, inf, tailMass, sparseResult);
    }

    /** dp-accounting's {@code _truncate_tails} (pessimistic): tails of mass ≤ tailMass/2 each are cut. */
    private Pld truncated(long lo, double[] p, double inf, double tailMass, boolean sparseResult) {
        if (tailMass == 0) {
            return new Pld(interval, lo, p, inf, sparseResult);
        }
        int left = prefixToTruncate(p, tailMass / 2, false);
        int right = p.length - prefixToTruncate(p, tailMass / 2, true);
        right = Math.max(right, left + 1);
        double leftMass = 0, rightMass = 0;
        for (int i = 0; i < left; i++) {
            leftMass += p[i];
        }
        for (int i = right; i < p.length; i++) {
            rightMass += p[i];
        }
        double[] kept = java.util.Arrays.copyOfRange(p, left, right);
        kept[0] += leftMass;
        return new Pld(interval, lo + left, kept, inf + rightMass, sparseResult);
    }

    private static int prefixToTruncate(double[] p, double threshold, boolean fromEnd) {
        double s = 0;
        for (int i = 0; i < p.length; i++) {
            s += p[fromEnd ? p.length - 1 - i : i];
            if (s > threshold) {
                return i;
            }
        }
        return p.length;
    }

    /** This PLD composed with itself {@code times} times (dp-accounting's {@code self_compose}). */
    public Pld selfCompose(long times) {
        if (times <= 0) {
            throw new IllegalArgumentException("num_times should be >= 1, num_times=" + times);
        }
        if (sparse) {
            if (times == 1) {
                return this;
            }
            long maxSize = 1;
            for (long i = 0; i < times && maxSize <= MAX_SPARSE_SIZE; i++) {
                maxSize *= size();
            }
            if (maxSize <= MAX_SPARSE_SIZE) {
                Pld result = this;
                for (long i = 2; i <= times; i++) {
                    result = result.sparseCompose(this, i == times ? TAIL_MASS : 0);
                }
                return result;
            }
        }
        return denseSelfCompose(times, TAIL_MASS);
    }

    private Pld sparseCompose(Pld other, double tailMass) {
        double[] conv = Fft.convolve(probs, other.probs);
        double inf = infinity + other.infinity - infinity * other.infinity;
        return truncated(lower + other.lower, conv, inf, tailMass, true);
    }

    /** dp-accounting's {@code DensePLDPmf.self_compose} with {@code common.self_convolve}. */
    private Pld denseSelfCompose(long times, double tailMass) {
        long[] bounds = selfConvolveBounds(probs, times, tailMass);
        long outLen = bounds[1] - bounds[0] + 1;
        int n = Math.max(2, Fft.powerOfTwoAtLeast(Math.max(outLen, probs.length)));
        double[][] spectrum = Fft.realForward(probs, n);          // a real sequence: X_{n-k} = conj X_k
        for (int k = 0; k <= n / 2; k++) {
            power(spectrum[0], spectrum[1], k, times);
        }
        double[] re = Fft.realInverse(spectrum[0], spectrum[1], n);
        double[] out = new double[(int) outLen];
        for (int j = 0; j < out.length; j++) {
            out[j] = re[(int) ((j + bounds[0]) % n)];
        }
        double inf = tailMass - Math.expm1(times * Math.log1p(-infinity));
        return new Pld(interval, lower * times + bounds[0], out, inf, false);
    }

    /**
     * The window [lower, upper] of indices of the {@code times}-fold convolution of {@code p} outside which lies
     * at most {@code tailMass} of the mass (Chernoff bounds at dp-accounting's orders ±1..20 / len).
     */
    static long[] selfConvolveBounds(double[] p, long times, double tailMass) {
        long upper = (long) (p.length - 1) * times, lowerBound = 0;
        if (tailMass == 0) {
            return new long[]{lowerBound, upper};
        }
        for (int k = -20; k <= 20; k++) {
            if (k == 0) {
                continue;
            }
            double order = (double) k / p.length;
            double bound = (times * logMgf(p, order) + Math.log(2 / tailMass)) / order;
            if (Double.isNaN(bound) || Double.isInfinite(bound)) {
                continue;
            }
            if (order > 0) {
                upper = Math.min(upper, (long) Math.ceil(bound));
            } else {
                lowerBound = Math.max(lowerBound, (long) Math.floor(bound));
            }
        }
        return new long[]{lowerBound, upper};
    }

    /** log Σ_i p_i e^{i·order}, as scipy's {@code logsumexp(arange(len)·order, b=p)} computes it. */
    static double logMgf(double[] p, double order) {
        int iMax = -1;
        double aMax = Double.NEGATIVE_INFINITY;
        for (int i = 0; i < p.length; i++) {
            double a = p[i] == 0 ? Double.NEGATIVE_INFINITY : i * order;
            if (iMax < 0 || a > aMax) {
                aMax = a;
                iMax = i;
            }
        }
        double m = p[iMax], s = 0;
        for (int i = 0; i < p.length; i++) {
            if (i != iMax && p[i] != 0) {
                s += p[i] * Math.exp(i * order - aMax);
            }
        }
        s = s == 0 ? s : s / m;
        return Math.log1p(s) + Math.log(m) + aMax;
    }

    /**
     * (re[k], im[k]) raised to the integer power {@code n} as numpy raises a complex128 array to an integer: by
     * repeated squaring below 100, else as exp(n·log z) (C's cpow), with log|z| taken through log1p near |z| = 1
     * as glibc's clog does.
     */
    static void power(double[] re, double[] im, int k, long n) {
        double ar = re[k], ai = im[k];
        if (n == 1) {
            return;
        }
        if (ar == 0 && ai == 0) {
            return;
        }
        if (n < 100) {
            // numpy unrolls n = 2 and 3 as a·a and a·(a·a): the same products the loop makes (1·x is exact)
            double pr = ar, pi = ai, rr = 1, ri = 0;
            long mask = 1;
            while (true) {
                if ((n & mask) != 0) {
                    double t = rr * pr - ri * pi;
                    ri = rr * pi + ri * pr;
                    rr = t;
                }
                mask <<= 1;
                if (n < mask) {
                    break;
                }
                double t = pr * pr - pi * pi;
                pi = pr * pi + pi * pr;
                pr = t;
            }
            re[k] = rr;
            im[k] = ri;
            return;
        }
        double logAbs = logAbs(ar, ai);
        double arg = StrictMath.atan2(ai, ar);
        double mag = Math.exp(n * logAbs);
        double angle = n * arg;
        re[k] = mag * StrictMath.cos(angle);
        im[k] = mag * StrictMath.sin(angle);
    }

    /** log |x + iy|, accurate to an ulp also where |z| is near 1 (there through log1p(x² + y² - 1), exactly). */
    static double logAbs(double x, double y) {
        double h = Math.hypot(x, y);
        if (h < 0.5 || h > 2) {
            return Math.log(h);
        }
        // x² + y² - 1 from exact products (Dekker): x² = xh + xl, summed with the error terms kept
        double[] px = twoSquare(x), py = twoSquare(y);
        double hi;
        double lo;
        if (px[0] >= py[0]) {
            hi = px[0] - 1.0;        // exact by Sterbenz when px[0] in [0.5, 2]; else exact enough below
            lo = py[0];
        } else {
            hi = py[0] - 1.0;
            lo = px[0];
        }
        double sum = hi + lo;
        double err = (hi - sum) + lo;
        return 0.5 * Math.log1p(sum + (err + px[1] + py[1]));
    }

    /** a² as hi + lo exactly (Veltkamp split, Dekker product). */
    private static double[] twoSquare(double a) {
        double c = 134217729.0 * a;     // 2^27 + 1
        double ah = c - (c - a), al = a - ah;
        double hi = a * a;
        double lo = ((ah * ah - hi) + 2 * ah * al) + al * al;
        return new double[]{hi, lo};
    }

    // -- hockey-stick divergence ----------------------------------------------------------------------------

    /** The smallest ε ≥ 0 at which this PLD's hockey-stick divergence is at most {@code delta} (∞ if none). */
    public double epsilonForDelta(double delta) {
        if (infinity > delta) {
            return Double.POSITIVE_INFINITY;
        }
        double massUpper = infinity, massLower = 0;
        double loss = sparse ? 0 : (double) (lower + probs.length - 1) * interval;
        for (int idx = probs.length - 1; idx >= 0; idx--) {
            if (sparse) {
                loss = (double) (lower + idx) * interval;
            } else if (idx < probs.length - 1) {
                loss = loss - interval;        // dp-accounting counts down by repeated subtraction
            }
            double prob = probs[idx];
            if (massUpper > delta && massLower > 0 && Math.log((massUpper - delta) / massLower) >= loss) {
                break;
            }
            massUpper += prob;
            massLower += Math.exp(-loss) * prob;
            if (massUpper >= delta && massLower == 0) {
                return Math.max(0, loss);
            }
        }
        if (massUpper <= massLower + delta) {
            return 0;
        }
        return Math.log((massUpper - delta) / massLower);
    }

    /** The hockey-stick divergence at {@code epsilon}: δ(ε) = P[∞] + Σ_{loss > ε} (1 - e^{ε - loss}) p. */
    public double deltaForEpsilon(double epsilon) {
        double delta = 0;
        for (int i = 0; i < probs.length; i++) {
            double loss = (double) (lower + i) * interval;
            if (loss > epsilon) {
                delta += -Math.expm1(epsilon - loss) * probs[i];
            }
        }
        return infinity + delta;
    }
}
