package org.pategail.core.secagg;

import java.security.GeneralSecurityException;

import javax.crypto.Cipher;
import javax.crypto.spec.IvParameterSpec;
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

    /** {@code nBytes} of AES-256-CTR keystream under the 32-byte seed. */
    public static byte[] keystream(byte[] seed, int nBytes) {
        if (seed.length != 32) {
            throw new IllegalArgumentException("PRG seeds are 32 bytes");
        }
        try {
            Cipher c = Cipher.getInstance("AES/CTR/NoPadding");
            c.init(Cipher.ENCRYPT_MODE, new SecretKeySpec(seed, "AES"), new IvParameterSpec(new byte[16]));
            return c.doFinal(new byte[nBytes]);
        } catch (GeneralSecurityException err) {
            throw new IllegalStateException("AES-CTR unavailable", err);
        }
    }

    /** {@code n} uniform elements of Z_2^64: the keystream's little-endian words. */
    public static long[] expandUint64(byte[] seed, int n) {
        byte[] ks = keystream(seed, 8 * n);
        long[] out = new long[n];
        for (int i = 0; i < n; i++) {
            out[i] = Bytes.getLongLE(ks, 8 * i);
        }
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
