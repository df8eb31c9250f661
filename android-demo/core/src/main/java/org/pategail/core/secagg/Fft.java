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
        double[] cos = new double[n / 2];
        double[] sin = new double[n / 2];
        double sign = inverse ? 1.0 : -1.0;
        for (int k = 0; k < n / 2; k++) {
            double angle = 2 * Math.PI * k / n;
            cos[k] = StrictMath.cos(angle);
            sin[k] = sign * StrictMath.sin(angle);
        }
        for (int len = 2; len <= n; len <<= 1) {
            int half = len >> 1, step = n / len;
            for (int start = 0; start < n; start += len) {
                for (int k = 0; k < half; k++) {
                    double wr = cos[k * step], wi = sin[k * step];
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
        // both real sequences in one complex transform (a + ib): A_k = (Z_k + conj Z_{-k}) / 2 and
        // B_k = (Z_k - conj Z_{-k}) / 2i, so A_k B_k = (Z_k² - conj(Z_{-k})²) / 4i — two arrays of n, not four
        int n = powerOfTwoAtLeast(outLen);
        double[] re = new double[n], im = new double[n];
        System.arraycopy(a, 0, re, 0, a.length);
        System.arraycopy(b, 0, im, 0, b.length);
        transform(re, im, false);
        for (int k = 0; k <= n / 2; k++) {
            int m = (n - k) & (n - 1);
            double zr = re[k], zi = im[k], wr = re[m], wi = -im[m];        // Z_k and conj Z_{-k}
            // (Z_k² - W²) / 4i with W = conj Z_{-k}; and at -k: (Z_{-k}² - conj(Z_k)²) / 4i
            double pr = (zr * zr - zi * zi) - (wr * wr - wi * wi), pi = 2 * (zr * zi - wr * wi);
            double qr = (wr * wr - wi * wi) - (zr * zr - zi * zi), qi = 2 * (zr * zi - wr * wi);
            re[k] = pi / 4;
            im[k] = -pr / 4;
            if (m != k) {
                re[m] = qi / 4;         // Z_{-k} = conj W, conj Z_k: the same with the roles swapped
                im[m] = -qr / 4;
            }
        }
        transform(re, im, true);
        double[] ar = re;
        System.arraycopy(ar, 0, out, 0, outLen);
        return out;
    }
}
