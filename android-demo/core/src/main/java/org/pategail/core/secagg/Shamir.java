package org.pategail.core.secagg;

import java.math.BigInteger;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Shamir t-of-n sharing of 32-byte secrets over Z_q, q = 2^256 + 297 (the Python SDK's {@code shamir.py}):
 * every 32-byte string is a field element; a share's y is 33 big-endian bytes.
 */
public final class Shamir {
    public static final BigInteger PRIME = BigInteger.ONE.shiftLeft(256).add(BigInteger.valueOf(297));
    public static final int SHARE_BYTES = 33;
    private static final BigInteger TWO_256 = BigInteger.ONE.shiftLeft(256);

    private Shamir() {
    }

    /** Shares f(x) of {@code secret} for a random polynomial of degree threshold - 1 with f(0) = secret. */
    public static BigInteger[] split(byte[] secret, int[] xs, int threshold, SecureRandom random) {
        if (secret.length != 32) {
            throw new IllegalArgumentException("Shamir secrets are 32 bytes");
        }
        if (threshold < 1 || threshold > xs.length) {
            throw new IllegalArgumentException("threshold " + threshold + " must be in [1, " + xs.length + "]");
        }
        BigInteger[] coeffs = new BigInteger[threshold];
        coeffs[0] = new BigInteger(1, secret);
        for (int i = 1; i < threshold; i++) {
            coeffs[i] = randomBelowPrime(random);
        }
        return evaluate(coeffs, xs);
    }

    /** f(x) for each x, f given by its coefficients (constant first); Horner's rule. */
    public static BigInteger[] evaluate(BigInteger[] coeffs, int[] xs) {
        java.util.HashSet<Integer> seen = new java.util.HashSet<>();
        BigInteger[] out = new BigInteger[xs.length];
        for (int k = 0; k < xs.length; k++) {
            if (xs[k] <= 0 || !seen.add(xs[k])) {
                throw new IllegalArgumentException("share x-coordinates must be distinct and non-zero");
            }
            BigInteger x = BigInteger.valueOf(xs[k]);
            BigInteger y = BigInteger.ZERO;
            for (int i = coeffs.length - 1; i >= 0; i--) {
                y = y.multiply(x).add(coeffs[i]).mod(PRIME);
            }
            out[k] = y;
        }
        return out;
    }

    private static BigInteger randomBelowPrime(SecureRandom random) {
        while (true) {
            BigInteger c = new BigInteger(257, random);
            if (c.compareTo(PRIME) < 0) {
                return c;
            }
        }
    }

    /** The secret from at least {@code threshold} (x, y) shares (the first {@code threshold} by x). */
    public static byte[] reconstruct(Map<Integer, BigInteger> shares, int threshold) {
        List<Map.Entry<Integer, BigInteger>> chosen = new ArrayList<>(new TreeMap<>(shares).entrySet());
        if (chosen.size() < threshold) {
            throw new IllegalArgumentException("need " + threshold + " distinct shares, got " + chosen.size());
        }
        chosen = chosen.subList(0, threshold);
        BigInteger value = BigInteger.ZERO;
        for (int i = 0; i < chosen.size(); i++) {
            BigInteger xi = BigInteger.valueOf(chosen.get(i).getKey());
            BigInteger num = BigInteger.ONE, den = BigInteger.ONE;
            for (int j = 0; j < chosen.size(); j++) {
                if (j != i) {
                    BigInteger xj = BigInteger.valueOf(chosen.get(j).getKey());
                    num = num.multiply(xj).mod(PRIME);
                    den = den.multiply(xj.subtract(xi)).mod(PRIME);
                }
            }
            value = value.add(num.multiply(den.modInverse(PRIME)).multiply(chosen.get(i).getValue())).mod(PRIME);
        }
        if (value.compareTo(TWO_256) >= 0) {
            throw new IllegalArgumentException("shares do not interpolate to a 32-byte secret");
        }
        return toFixed(value, 32);
    }

    /** A share's y as 33 big-endian bytes. */
    public static byte[] yToBytes(BigInteger y) {
        return toFixed(y, SHARE_BYTES);
    }

    /** Inverse of {@link #yToBytes}; rejects values outside the field. */
    public static BigInteger yFromBytes(byte[] data) {
        if (data.length != SHARE_BYTES) {
            throw new IllegalArgumentException("a share is 33 bytes");
        }
        BigInteger y = new BigInteger(1, data);
        if (y.compareTo(PRIME) >= 0) {
            throw new IllegalArgumentException("share outside the field");
        }
        return y;
    }

    private static byte[] toFixed(BigInteger v, int n) {
        byte[] raw = v.toByteArray();          // big-endian, possibly with a leading sign byte
        byte[] out = new byte[n];
        int copy = Math.min(raw.length, n);
        System.arraycopy(raw, raw.length - copy, out, n - copy, copy);
        return out;
    }
}
