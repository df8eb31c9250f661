package org.pategail.core.secagg;

/**
 * The discrete Fourier transform of a complex sequence whose length is a power of two (iterative radix-2
 * Cooley-Tukey, twiddle factors computed directly rather than by recurrence, so the error stays at a few ulp times
 * log₂ n), and the linear convolution of two real sequences built on it. numpy's sign convention: the forward
 * transform is X_k = Σ_j x_j e^{-2πi jk/n}, the inverse divides by n.
 */
public final class Fft {
    /** Below this many multiply-adds a convolution is summed directly (exact to rounding, and faster). */
    static final long DIRECT_LIMIT = 1L << 16;

    private Fft() {
    }

    /** The smallest power of two >= {@code n} (n >= 1). */
    public static int powerOfTwoAtLeast(long n) {
        if (n < 1 || n > (1 << 30)) {
            throw new IllegalArgumentException("transform length out of range: " + n);
        }
        int p = 1;
        while (p < n) {
            p <<= 1;
        }
        return p;
    }

    /** cos and sin of 2πk/m for k < m/2, for the largest length m transformed so far (shorter ones stride it). */
    private static double[][] table = {new double[0], new double[0]};

    private static synchronized double[][] twiddles(int n) {
        if (table[0].length * 2 < n) {
            double[] cos = new double[n / 2], sin = new double[n / 2];
            for (int k = 0; k < n / 2; k++) {
                double angle = 2 * Math.PI * k / n;
                cos[k] = StrictMath.cos(angle);
                sin[k] = StrictMath.sin(angle);
            }
            table = new double[][]{cos, sin};
        }
        return table;
    }

    /**
     * Transforms ({@code re}, {@code im}) in place: forward when {@code inverse} is false, else the inverse
     * (including the 1/n). The length must be a power of two.
     */
    public static void transform(double[] re, double[] im, boolean inverse) {
        int n = re.length;
        if (im.length != n || Integer.bitCount(n) != 1) {
            throw new IllegalArgumentException("FFT length must be a power of two, got " + n);
        }
        for (int i = 1, j = 0; i < n; i++) {           // bit-reversal permutation
            int bit = n >> 1;
            for (; (j & bit) != 0; bit >>= 1) {
                j ^= bit;
            }
            j ^= bit;
            if (i < j) {
                double t = re[i];
                re[i] = re[j];
                re[j] = t;
                t = im[i];
                im[i] = im[j];
                im[j] = t;
            }
        }
        double[][] table = twiddles(n);
        double[] cos = table[0], sin = table[1];
        int stride = cos.length * 2 / n;
        double sign = inverse ? 1.0 : -1.0;
        for (int len = 2; len <= n; len <<= 1) {
            int half = len >> 1, step = n / len * stride;
            for (int start = 0; start < n; start += len) {
                for (int k = 0; k < half; k++) {
                    double wr = cos[k * step], wi = sign * sin[k * step];
                    int a = start + k, b = a + half;
                    double xr = re[b] * wr - im[b] * wi;
                    double xi = re[b] * wi + im[b] * wr;
                    re[b] = re[a] - xr;
                    im[b] = im[a] - xi;
                    re[a] += xr;
                    im[a] += xi;
                }
            }
        }
        if (inverse) {
            for (int i = 0; i < n; i++) {
                re[i] /= n;
                im[i] /= n;
            }
        }
    }

    /**
     * The transform X_0 .. X_{n/2} of the real sequence {@code x} zero-padded to {@code n} (a power of two ≥ 2;
     * the rest is conj X_{n-k}), through one complex transform of n/2 points: z_j = x_{2j} + i x_{2j+1}, then
     * X_k = E_k + e^{-2πik/n} O_k with E_k = (Z_k + conj Z_{n/2-k}) / 2 and O_k = (Z_k - conj Z_{n/2-k}) / 2i.
     */
    public static double[][] realForward(double[] x, int n) {
        int m = n / 2;
        if (n < 2 || Integer.bitCount(n) != 1 || x.length > n) {
            throw new IllegalArgumentException("real FFT length must be a power of two >= 2 and the input's, got " + n);
        }
        double[] zr = new double[m], zi = new double[m];
        for (int j = 0; j < m; j++) {
            zr[j] = 2 * j < x.length ? x[2 * j] : 0.0;
            zi[j] = 2 * j + 1 < x.length ? x[2 * j + 1] : 0.0;
        }
        transform(zr, zi, false);
        double[][] t = twiddles(n);
        int stride = t[0].length * 2 / n;
        double[] re = new double[m + 1], im = new double[m + 1];
        for (int k = 0; k <= m; k++) {
            int a = k % m, b = (m - k) % m;
            double er = (zr[a] + zr[b]) / 2, ei = (zi[a] - zi[b]) / 2;          // E_k
            double or = (zi[a] + zi[b]) / 2, oi = -(zr[a] - zr[b]) / 2;         // O_k = (Z_k - conj Z_{m-k}) / 2i
            double wr = k == m ? -1.0 : t[0][k * stride], wi = k == m ? 0.0 : -t[1][k * stride];
            re[k] = er + (wr * or - wi * oi);
            im[k] = ei + (wr * oi + wi * or);
        }
        return new double[][]{re, im};
    }

    /** The real sequence of length {@code n} whose transform is X_0 .. X_{n/2} ({@code re}, {@code im}). */
    public static double[] realInverse(double[] re, double[] im, int n) {
        int m = n / 2;
        if (re.length != m + 1 || im.length != m + 1) {
            throw new IllegalArgumentException("a real inverse of " + n + " points needs " + (m + 1) + " values");
        }
        double[][] t = twiddles(n);
        int stride = t[0].length * 2 / n;
        double[] zr = new double[m], zi = new double[m];
        for (int k = 0; k < m; k++) {
            int b = m - k;                                             // conj X_{m-k}
            double er = (re[k] + re[b]) / 2, ei = (im[k] - im[b]) / 2;
            double dr = (re[k] - re[b]) / 2, di = (im[k] + im[b]) / 2;   // (X_k - conj X_{m-k}) / 2
            double wr = t[0][k * stride], wi = t[1][k * stride];        // conj of e^{-2πik/n}
            double or = dr * wr - di * wi, oi = dr * wi + di * wr;
            zr[k] = er - oi;                                           // Z_k = E_k + i O_k
            zi[k] = ei + or;
        }
        transform(zr, zi, true);
        double[] x = new double[n];
        for (int j = 0; j < m; j++) {
            x[2 * j] = zr[j];
            x[2 * j + 1] = zi[j];
        }
        return x;
    }

    /** The linear convolution of {@code a} and {@code b} (length a + b - 1): directly when small, else by FFT. */
    public static double[] convolve(double[] a, double[] b) {
        if (a.length == 0 || b.length == 0) {
            throw new IllegalArgumentException("cannot convolve an empty sequence");
        }
        int outLen = a.length + b.length - 1;
        double[] out = new double[outLen];
        if ((long) a.length * b.length <= DIRECT_LIMIT || Math.min(a.length, b.length) <= 8) {
            for (int i = 0; i < a.length; i++) {
                for (int j = 0; j < b.length; j++) {
                    out[i + j] += a[i] * b[j];
                }
            }
            return out;
        }
        int n = Math.max(2, powerOfTwoAtLeast(outLen));
        double[][] fa = realForward(a, n), fb = realForward(b, n);
        for (int k = 0; k <= n / 2; k++) {
            double r = fa[0][k] * fb[0][k] - fa[1][k] * fb[1][k];
            fa[1][k] = fa[0][k] * fb[1][k] + fa[1][k] * fb[0][k];
            fa[0][k] = r;
        }
        double[] ar = realInverse(fa[0], fa[1], n);
        System.arraycopy(ar, 0, out, 0, outLen);
        return out;
    }
}
