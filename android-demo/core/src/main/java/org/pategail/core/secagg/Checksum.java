package org.pategail.core.secagg;

/**
 * The keyed affine checksum a device appends to its upload (the Python SDK's {@code checksum.py}):
 * c_u = Σ_i r_i x_i + k_u mod p with weights r expanded from the round's checksum key and the device's secret
 * offset k_u (both sealed to the device by the coordinator), p = 2^61 - 1.
 */
public final class Checksum {
    private static final long P = Prg.P61;

    private Checksum() {
    }

    /** The checksum weights r_1..r_n in Z_P61. */
    public static long[] weights(byte[] key, int n) {
        long[] w = Prg.expandUint64(Crypto.hkdf(key, "checksum-weights"), n);
        for (int i = 0; i < n; i++) {
            w[i] = Long.remainderUnsigned(w[i], P);
        }
        return w;
    }

    /** Σ_i w_i x_i + offset mod P61 for signed 64-bit {@code values} and an offset in [0, P61) (exact). */
    public static long checksum(long[] values, long[] w, long offset) {
        long acc = offset;
        for (int i = 0; i < values.length; i++) {
            acc += mulMod(w[i], Math.floorMod(values[i], P));
            if (acc >= P) {
                acc -= P;
            }
        }
        return acc;
    }

    /** a * b mod P61 for a, b in [0, P61): the 122-bit product folded with 2^61 = 1 (mod P61). */
    static long mulMod(long a, long b) {
        long lo = a * b;
        long hi = multiplyHighUnsigned(a, b);
        // product = hi * 2^64 + lo = (hi << 3) * 2^61 + (lo >>> 61) * 2^61 + (lo & P)
        long r = (lo & P) + (lo >>> 61) + (hi << 3);
        r = (r & P) + (r >>> 61);
        return r >= P ? r - P : r;
    }

    /** The high 64 bits of the unsigned 128-bit product (Math.multiplyHigh needs Android API 31). */
    static long multiplyHighUnsigned(long x, long y) {
        long x0 = x & 0xFFFFFFFFL, x1 = x >>> 32;
        long y0 = y & 0xFFFFFFFFL, y1 = y >>> 32;
        long w0 = x0 * y0;
        long t = x1 * y0 + (w0 >>> 32);
        long w1 = (t & 0xFFFFFFFFL) + x0 * y1;
        return x1 * y1 + (t >>> 32) + (w1 >>> 32);
    }

    private static final byte[] COMMITMENT_LABEL = "pategail-secagg/checksum-key".getBytes(
            java.nio.charset.StandardCharsets.US_ASCII);

    /**
     * SHA-256 commitment to the round's checksum key K, signed in the round configuration
     * ({@link RoundConfig#checksumCommitment}): one key for all devices of a round.
     */
    public static byte[] keyCommitment(byte[] key) {
        try {
            java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
            md.update(COMMITMENT_LABEL);
            md.update(key);
            return md.digest();
        } catch (java.security.NoSuchAlgorithmException err) {
            throw new IllegalStateException(err);
        }
    }

    /** The associated data of the envelope that carries the checksum secrets to {@code device}. */
    public static byte[] envelopeAad(byte[] configDigest, long device) {
        return new Wire.Writer().raw("checksum-envelope".getBytes(java.nio.charset.StandardCharsets.US_ASCII))
                .raw(configDigest).u32(device).bytes();
    }

    /** The AES-GCM key of the envelope of {@code device} in the round with configuration digest {@code configDigest}. */
    public static byte[] envelopeKey(byte[] sharedSecret, byte[] configDigest, long device) {
        return Crypto.hkdfSalted(sharedSecret, configDigest, "envelope", device);
    }

    /** The envelope's plaintext: the checksum key K (32 bytes) and the offset k_u (u64, in Z_P61). */
    public static Object[] unpackSecrets(byte[] plain) throws SecAggException {
        if (plain.length != 40) {
            throw SecAggException.rejected("checksum envelope of the wrong size");
        }
        Wire.Reader r = new Wire.Reader(plain);
        byte[] key = r.raw(32);
        long offset = r.u64();
        if (Long.compareUnsigned(offset, P) >= 0) {
            throw SecAggException.rejected("checksum offset outside Z_p");
        }
        return new Object[]{key, offset};
    }
}
