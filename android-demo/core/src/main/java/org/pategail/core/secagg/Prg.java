package org.pategail.core.secagg;

import java.security.GeneralSecurityException;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import javax.crypto.Cipher;
import javax.crypto.spec.SecretKeySpec;

/**
 * The masks' pseudo-random generator: AES-256-CTR from an all-zero counter block (each seed is expanded once
 * per round), as the Python SDK's {@code prg.py}. The last word of a mask is reduced into Z_p, p = 2^61 - 1.
 */
public final class Prg {
    /** The Mersenne prime of the checksum field. */
    public static final long P61 = (1L << 61) - 1;

    private Prg() {
    }

    /**
     * {@code nBytes} of AES-256-CTR keystream under the 32-byte seed, counter blocks 0, 1, 2, ... (big-endian,
     * as the Python SDK's {@code modes.CTR(bytes(16))}). Computed as AES-ECB over the counter blocks: the same
     * bytes, and on the JDK about twice as fast as its CTR mode (Android's BoringSSL is fast either way).
     */
    public static byte[] keystream(byte[] seed, int nBytes) {
        if (seed.length != 32) {
            throw new IllegalArgumentException("PRG seeds are 32 bytes");
        }
        int blocks = (nBytes + 15) / 16;
        byte[] counters = new byte[16 * blocks];
        for (int b = 0; b < blocks; b++) {        // fewer than 2^31 blocks: the high 12 bytes stay zero
            int at = 16 * b + 12;
            counters[at] = (byte) (b >>> 24);
            counters[at + 1] = (byte) (b >>> 16);
            counters[at + 2] = (byte) (b >>> 8);
            counters[at + 3] = (byte) b;
        }
        try {
            Cipher c = Cipher.getInstance("AES/ECB/NoPadding");
            c.init(Cipher.ENCRYPT_MODE, new SecretKeySpec(seed, "AES"));
            c.doFinal(counters, 0, counters.length, counters, 0);        // in place
        } catch (GeneralSecurityException err) {
            throw new IllegalStateException("AES unavailable", err);
        }
        return counters.length == nBytes ? counters : java.util.Arrays.copyOf(counters, nBytes);
    }

    /** {@code n} uniform elements of Z_2^64: the keystream's little-endian words. */
    public static long[] expandUint64(byte[] seed, int n) {
        long[] out = new long[n];
        ByteBuffer.wrap(keystream(seed, 8 * n)).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(out);
        return out;
    }

    /** The mask of one upload: {@code nData + 1} words, the last reduced (as unsigned) into Z_P61. */
    public static long[] expandMask(byte[] seed, int nData) {
        long[] m = expandUint64(seed, nData + 1);
        m[nData] = Long.remainderUnsigned(m[nData], P61);
        return m;
    }

    /** In place: acc += sign * mask, data slots in Z_2^64 and the last slot in Z_P61. */
    public static void addMask(long[] acc, long[] mask, int sign) {
        int last = acc.length - 1;
        if (sign > 0) {
            for (int i = 0; i < last; i++) {
                acc[i] += mask[i];
            }
            acc[last] = (acc[last] + mask[last]) % P61;
        } else {
            for (int i = 0; i < last; i++) {
                acc[i] -= mask[i];
            }
            acc[last] = Math.floorMod(acc[last] - mask[last], P61);
        }
    }
}
