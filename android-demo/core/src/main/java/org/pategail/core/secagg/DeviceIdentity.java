package org.pategail.core.secagg;

import java.security.SecureRandom;

/**
 * A device's long-term keys: Ed25519 to sign its messages, X25519 to receive the coordinator's sealed
 * checksum keys. The stored form is the Python SDK's {@code identity.key}: 32 raw Ed25519 private bytes,
 * then 32 raw X25519 private bytes.
 */
public final class DeviceIdentity {
    private final byte[] signingKey;
    private final byte[] envelopeKey;
    public final byte[] signingPublic;
    public final byte[] envelopePublic;

    public DeviceIdentity(byte[] signingKey, byte[] envelopeKey) {
        if (signingKey.length != 32 || envelopeKey.length != 32) {
            throw new IllegalArgumentException("identity keys are 32 bytes each");
        }
        this.signingKey = signingKey.clone();
        this.envelopeKey = envelopeKey.clone();
        this.signingPublic = Crypto.ed25519Public(signingKey);
        this.envelopePublic = Crypto.x25519Public(envelopeKey);
    }

    /** Fresh keys from the platform CSPRNG. */
    public static DeviceIdentity generate(SecureRandom random) {
        return new DeviceIdentity(Crypto.randomKey(random), Crypto.randomKey(random));
    }

    /** From the 64-byte stored form. */
    public static DeviceIdentity fromBytes(byte[] raw) {
        if (raw.length != 64) {
            throw new IllegalArgumentException("not an identity file (expected 64 bytes)");
        }
        return new DeviceIdentity(java.util.Arrays.copyOfRange(raw, 0, 32), java.util.Arrays.copyOfRange(raw, 32, 64));
    }

    /** The 64-byte stored form (private: the app keeps it in its private storage only). */
    public byte[] toBytes() {
        return Bytes.concat(signingKey, envelopeKey);
    }

    public byte[] sign(byte[] data) {
        return Crypto.sign(signingKey, data);
    }

    byte[] envelopePrivate() {
        return envelopeKey;
    }
}
