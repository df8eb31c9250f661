package org.pategail.core.secagg;

import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.util.Arrays;

import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

import org.bouncycastle.crypto.digests.SHA256Digest;
import org.bouncycastle.crypto.generators.HKDFBytesGenerator;
import org.bouncycastle.crypto.params.Ed25519PrivateKeyParameters;
import org.bouncycastle.crypto.params.Ed25519PublicKeyParameters;
import org.bouncycastle.crypto.params.HKDFParameters;
import org.bouncycastle.crypto.params.X25519PrivateKeyParameters;
import org.bouncycastle.crypto.params.X25519PublicKeyParameters;
import org.bouncycastle.crypto.signers.Ed25519Signer;

/**
 * The protocol's primitives, byte-compatible with the Python SDK's {@code crypto.py}: X25519 agreement and
 * Ed25519 signatures from BouncyCastle's lightweight API (which runs unchanged on Android, where the platform
 * JCA has no X25519 below API 33), HKDF-SHA256 with the project's domain-separated info strings, and
 * AES-256-GCM from the platform JCA (hardware AES on phones and servers alike).
 */
public final class Crypto {
    public static final int KEY_BYTES = 32;
    public static final int SIGNATURE_BYTES = 64;
    public static final int NONCE_BYTES = 12;
    private static final byte[] LABEL = "pategail-secagg-v1/".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    private Crypto() {
    }

    /** The raw public key of a raw X25519 private key. */
    public static byte[] x25519Public(byte[] privateKey) {
        return new X25519PrivateKeyParameters(privateKey, 0).generatePublicKey().getEncoded();
    }

    /** The raw public key of a raw Ed25519 private key. */
    public static byte[] ed25519Public(byte[] privateKey) {
        return new Ed25519PrivateKeyParameters(privateKey, 0).generatePublicKey().getEncoded();
    }

    /** 32 fresh bytes from the platform CSPRNG (a new X25519 private key, a seed, a checksum key). */
    public static byte[] randomKey(SecureRandom random) {
        byte[] out = new byte[KEY_BYTES];
        random.nextBytes(out);
        return out;
    }

    /** A 32-byte key for {@code purpose} bound to the integer {@code context} values (u64 big-endian each). */
    public static byte[] hkdf(byte[] secret, String purpose, long... context) {
        return hkdfSalted(secret, null, purpose, context);
    }

    /** {@link #hkdf} with an HKDF salt: the round configuration's digest, for keys that belong to one round. */
    public static byte[] hkdfSalted(byte[] secret, byte[] salt, String purpose, long... context) {
        Wire.Writer info = new Wire.Writer().raw(LABEL).raw(purpose.getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        for (long c : context) {
            info.u64(c);
        }
        HKDFBytesGenerator gen = new HKDFBytesGenerator(new SHA256Digest());
        gen.init(new HKDFParameters(secret, salt, info.bytes()));
        byte[] out = new byte[KEY_BYTES];
        gen.generateBytes(out, 0, KEY_BYTES);
        return out;
    }

    /** The X25519 shared secret; a malformed or low-order peer key is a rejected message. */
    public static byte[] agree(byte[] privateKey, byte[] peerPublic) throws SecAggException {
        if (peerPublic.length != KEY_BYTES) {
            throw SecAggException.rejected("bad X25519 public key: not 32 bytes");
        }
        byte[] out = new byte[KEY_BYTES];
        try {
            new X25519PrivateKeyParameters(privateKey, 0).generateSecret(new X25519PublicKeyParameters(peerPublic, 0),
                    out, 0);
        } catch (IllegalStateException err) {       // an all-zero secret: a low-order point
            throw SecAggException.rejected("bad X25519 public key: low-order point");
        }
        return out;
    }

    /** The pairwise mask seed s_uv = s_vu (device ids in increasing order in the info string). */
    public static byte[] maskSeed(byte[] privateKey, byte[] peerPublic, byte[] configDigest, long u, long v)
            throws SecAggException {
        return hkdfSalted(agree(privateKey, peerPublic), configDigest, "mask", Math.min(u, v), Math.max(u, v));
    }

    /** The AES-GCM key for shares from {@code sender} to {@code recipient}. */
    public static byte[] shareKey(byte[] sharedSecret, byte[] configDigest, long sender, long recipient) {
        return hkdfSalted(sharedSecret, configDigest, "share", sender, recipient);
    }

    /** nonce || AES-256-GCM(plaintext) with associated data. */
    public static byte[] seal(byte[] key, byte[] plaintext, byte[] aad, SecureRandom random) {
        byte[] nonce = new byte[NONCE_BYTES];
        random.nextBytes(nonce);
        try {
            Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
            c.init(Cipher.ENCRYPT_MODE, new SecretKeySpec(key, "AES"), new GCMParameterSpec(128, nonce));
            c.updateAAD(aad);
            return Bytes.concat(nonce, c.doFinal(plaintext));
        } catch (GeneralSecurityException err) {
            throw new IllegalStateException("AES-GCM unavailable", err);
        }
    }

    /** Inverse of {@link #seal}; any tampering, a wrong key or a wrong aad is a rejected message. */
    public static byte[] openSealed(byte[] key, byte[] blob, byte[] aad) throws SecAggException {
        if (blob.length < NONCE_BYTES + 16) {
            throw SecAggException.rejected("authenticated decryption failed");
        }
        try {
            Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
            c.init(Cipher.DECRYPT_MODE, new SecretKeySpec(key, "AES"),
                    new GCMParameterSpec(128, Arrays.copyOfRange(blob, 0, NONCE_BYTES)));
            c.updateAAD(aad);
            return c.doFinal(blob, NONCE_BYTES, blob.length - NONCE_BYTES);
        } catch (GeneralSecurityException err) {
            throw SecAggException.rejected("authenticated decryption failed");
        }
    }

    /** An Ed25519 signature (deterministic: equal to the Python SDK's for the same key and data). */
    public static byte[] sign(byte[] signingKey, byte[] data) {
        Ed25519Signer s = new Ed25519Signer();
        s.init(true, new Ed25519PrivateKeyParameters(signingKey, 0));
        s.update(data, 0, data.length);
        return s.generateSignature();
    }

    /** True when {@code signature} is a valid Ed25519 signature of {@code data} under the raw public key. */
    public static boolean verify(byte[] publicKey, byte[] signature, byte[] data) {
        if (publicKey == null || signature.length != SIGNATURE_BYTES || publicKey.length != KEY_BYTES) {
            return false;
        }
        try {
            Ed25519Signer s = new Ed25519Signer();
            s.init(false, new Ed25519PublicKeyParameters(publicKey, 0));
            s.update(data, 0, data.length);
            return s.verifySignature(signature);
        } catch (IllegalArgumentException err) {
            return false;
        }
    }
}
