package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.security.SecureRandom;

import org.junit.jupiter.api.Test;
import org.pategail.core.secagg.Noise;

/**
 * The noise shares are a distribution, not bytes: n_min shares must sum to the discrete Laplace law
 * DLap(a), a = 1/scale, whose P(0) = (1-q)/(1+q) and variance 2q/(1-q)^2 with q = e^-a.
 */
class NoiseTest {
    /** The sum of {@code devices} devices' shares of {@code mechanism} noise, each sized for {@code devices}. */
    static long[] sumOfShares(Noise noise, String mechanism, double scale, int devices, int size) {
        long[] sum = new long[size];
        for (int d = 0; d < devices; d++) {
            long[] share = noise.share(mechanism, scale, devices, size);
            for (int i = 0; i < size; i++) {
                sum[i] += share[i];
            }
        }
        return sum;
    }

    static double mean(long[] x) {
        double m = 0;
        for (long v : x) {
            m += v;
        }
        return m / x.length;
    }

    static double variance(long[] x) {
        double m = mean(x), var = 0;
        for (long v : x) {
            var += (v - m) * (v - m);
        }
        return var / (x.length - 1);
    }

    @Test
    void nMinSharesSumToDiscreteLaplace() {
        Noise noise = new Noise(new SecureRandom());
        double scale = 3.0;
        int nMin = 4, size = 60_000;
        long[] sum = sumOfShares(noise, "laplace", scale, nMin, size);
        double q = Math.exp(-1 / scale);
        double zeros = 0;
        for (long s : sum) {
            zeros += s == 0 ? 1 : 0;
        }
        double mean = mean(sum), var = variance(sum);
        double wantVar = 2 * q / ((1 - q) * (1 - q));
        double wantZero = (1 - q) / (1 + q);
        // standard errors: mean sqrt(var/n) ~ 0.02; var ~ 1.6% relative; P(0) ~ 0.0017
        assertEquals(0.0, mean, 5 * Math.sqrt(wantVar / size));
        assertEquals(wantVar, var, 0.08 * wantVar);
        assertEquals(wantZero, zeros / size, 5 * Math.sqrt(wantZero * (1 - wantZero) / size));
    }

    /**
     * d devices' discrete-Gaussian shares N_Z(0, σ²/d) sum to noise of variance σ² (each share's variance is
     * within e^-(2π²s²) of s² for s of a few quanta; Canonne, Kamath, Steinke 2020), and one share has the law
     * P(k) ∝ exp(-k²/(2s²)): its P(0) and P(|k| = 1) / P(0) = e^(-1/(2s²)) hold.
     */
    @Test
    void discreteGaussianSharesHaveTheirLaw() {
        Noise noise = new Noise(new SecureRandom());
        double std = 6.0;
        int d = 4, size = 60_000;
        long[] sum = sumOfShares(noise, "gaussian", std, d, size);
        assertEquals(0.0, mean(sum), 5 * std / Math.sqrt(size));
        assertEquals(std * std, variance(sum), 5 * std * std * Math.sqrt(2.0 / size));    // ~0.6% standard error
        double s = std / Math.sqrt(d);
        long[] one = noise.share("gaussian", std, d, size);
        double norm = 0;
        for (int k = -60; k <= 60; k++) {
            norm += Math.exp(-k * k / (2 * s * s));
        }
        double zeros = 0, ones = 0;
        for (long x : one) {
            zeros += x == 0 ? 1 : 0;
            ones += Math.abs(x) == 1 ? 1 : 0;
        }
        double p0 = 1 / norm;
        assertEquals(p0, zeros / size, 5 * Math.sqrt(p0 * (1 - p0) / size));
        double p1 = 2 * Math.exp(-1 / (2 * s * s)) / norm;
        assertEquals(p1, ones / size, 5 * Math.sqrt(p1 * (1 - p1) / size));
        assertArrayEquals(new long[7], noise.share("gaussian", 0, 3, 7));
        assertThrows(IllegalArgumentException.class, () -> noise.share("gaussian", 0.5, 3, 5));
    }

    @Test
    void zeroScaleIsNoNoiseAndBadScalesAreRefused() {
        Noise noise = new Noise(new SecureRandom());
        assertArrayEquals(new long[5], noise.discreteLaplaceShare(0, 3, 5));
        assertThrows(IllegalArgumentException.class, () -> noise.discreteLaplaceShare(0.5, 3, 5));
        assertThrows(IllegalArgumentException.class, () -> noise.discreteLaplaceShare(4, 0, 5));
        long[] a = noise.discreteLaplaceShare(1e6, 1, 1000);
        boolean large = false;
        for (long x : a) {
            large |= Math.abs(x) > 1000;
        }
        assertTrue(large, "a scale of 1e6 quanta gives large noise");
    }
}
