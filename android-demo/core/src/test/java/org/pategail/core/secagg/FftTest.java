package org.pategail.core.secagg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;

import org.junit.jupiter.api.Test;

/** The FFT against the DFT's definition, its inverse, and convolution against direct summation. */
class FftTest {
    private static double[][] naiveDft(double[] re, double[] im) {
        int n = re.length;
        double[][] out = new double[2][n];
        for (int k = 0; k < n; k++) {
            for (int j = 0; j < n; j++) {
                double a = -2 * Math.PI * ((long) j * k % n) / n;
                out[0][k] += re[j] * Math.cos(a) - im[j] * Math.sin(a);
                out[1][k] += re[j] * Math.sin(a) + im[j] * Math.cos(a);
            }
        }
        return out;
    }

    @Test
    void forwardTransformIsTheDftAndTheInverseUndoesIt() {
        Random rng = new Random(3);
        for (int n : new int[]{1, 2, 8, 64, 512}) {
            double[] re = new double[n], im = new double[n];
            for (int i = 0; i < n; i++) {
                re[i] = rng.nextGaussian();
                im[i] = rng.nextGaussian();
            }
            double[][] want = naiveDft(re, im);
            double[] r = re.clone(), m = im.clone();
            Fft.transform(r, m, false);
            for (int k = 0; k < n; k++) {
                assertEquals(want[0][k], r[k], 1e-11 * n, "re " + n + "/" + k);
                assertEquals(want[1][k], m[k], 1e-11 * n, "im " + n + "/" + k);
            }
            Fft.transform(r, m, true);
            for (int i = 0; i < n; i++) {
                assertEquals(re[i], r[i], 1e-14, "round trip " + n);
                assertEquals(im[i], m[i], 1e-14, "round trip " + n);
            }
        }
    }

    @Test
    void aRealSequencesTransformIsTheComplexOnesFirstHalfAndInvertsBack() {
        Random rng = new Random(7);
        for (int n : new int[]{2, 4, 16, 1024}) {
            double[] x = new double[n - n / 4];                // zero-padded to n
            for (int i = 0; i < x.length; i++) {
                x[i] = rng.nextDouble();
            }
            double[] re = new double[n], im = new double[n];
            System.arraycopy(x, 0, re, 0, x.length);
            Fft.transform(re, im, false);
            double[][] half = Fft.realForward(x, n);
            assertEquals(n / 2 + 1, half[0].length);
            for (int k = 0; k <= n / 2; k++) {
                assertEquals(re[k], half[0][k], 1e-12 * n, n + ": re " + k);
                assertEquals(im[k], half[1][k], 1e-12 * n, n + ": im " + k);
            }
            double[] back = Fft.realInverse(half[0], half[1], n);
            for (int i = 0; i < n; i++) {
                assertEquals(i < x.length ? x[i] : 0.0, back[i], 1e-14, n + ": " + i);
            }
        }
    }

    @Test
    void aShiftedImpulseTransformsToAPurePhase() {
        int n = 16;
        double[] re = new double[n], im = new double[n];
        re[3] = 1;
        Fft.transform(re, im, false);
        for (int k = 0; k < n; k++) {
            assertEquals(Math.cos(-2 * Math.PI * 3 * k / n), re[k], 1e-15);
            assertEquals(Math.sin(-2 * Math.PI * 3 * k / n), im[k], 1e-15);
        }
    }

    @Test
    void convolutionByFftEqualsTheDirectSum() {
        Random rng = new Random(5);
        double[] a = new double[700], b = new double[1300];
        for (int i = 0; i < a.length; i++) {
            a[i] = rng.nextDouble();
        }
        for (int i = 0; i < b.length; i++) {
            b[i] = rng.nextDouble();
        }
        assertTrue((long) a.length * b.length > Fft.DIRECT_LIMIT);      // the FFT path
        double[] got = Fft.convolve(a, b);
        assertEquals(a.length + b.length - 1, got.length);
        for (int k = 0; k < got.length; k += 37) {
            double want = 0;
            for (int i = Math.max(0, k - b.length + 1); i <= Math.min(k, a.length - 1); i++) {
                want += a[i] * b[k - i];
            }
            assertEquals(want, got[k], 1e-10, "index " + k);
        }
    }

    @Test
    void binomialCoefficientsComeOutOfRepeatedConvolution() {
        double[] p = {0.5, 0.5};
        double[] acc = {1.0};
        for (int i = 0; i < 40; i++) {
            acc = Fft.convolve(acc, p);
        }
        double[] big = new double[600];                      // and through the FFT path: 600 ⊛ 600
        big[0] = 1;
        double[] viaFft = Fft.convolve(big, acc);
        double c = 1;
        for (int k = 0; k <= 40; k++) {
            assertEquals(c / Math.pow(2, 40), acc[k], 1e-15, "C(40," + k + ")");
            assertEquals(c / Math.pow(2, 40), viaFft[k], 1e-15, "C(40," + k + ") via FFT");
            c = c * (40 - k) / (k + 1);
        }
    }

    @Test
    void aLengthThatIsNoPowerOfTwoIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> Fft.transform(new double[12], new double[12], false));
        assertEquals(16, Fft.powerOfTwoAtLeast(9));
        assertEquals(1, Fft.powerOfTwoAtLeast(1));
    }
}
