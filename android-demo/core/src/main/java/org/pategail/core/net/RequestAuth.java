package org.pategail.core.net;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.LinkedHashMap;
import java.util.Map;

import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.DeviceIdentity;
import org.pategail.core.secagg.Wire;

/**
 * Signed device requests (the Python SDK's {@code pategail.sdk.net.auth}): every request after enrolment
 * carries the device's id, a nonce and an Ed25519 signature over "pategail-net-v1/request\0", the method, the
 * path, the id, the nonce and the SHA-256 of the body. The nonce is the wall clock in nanoseconds, made
 * strictly increasing: the service accepts a nonce only above the last one it saw from the device and close
 * to its own clock, so a recorded request replayed later is refused.
 */
public final class RequestAuth {
    public static final String HEADER_DEVICE = "X-Pategail-Device";
    public static final String HEADER_NONCE = "X-Pategail-Nonce";
    public static final String HEADER_SIGNATURE = "X-Pategail-Signature";
    private static final byte[] DOMAIN = "pategail-net-v1/request\0".getBytes(StandardCharsets.US_ASCII);
    private long last;

    /** What a device signs for one request. */
    public static byte[] signedBytes(String method, String path, long deviceId, long nonce, byte[] body) {
        byte[] digest;
        try {
            digest = MessageDigest.getInstance("SHA-256").digest(body);
        } catch (NoSuchAlgorithmException err) {
            throw new IllegalStateException(err);
        }
        return Bytes.concat(DOMAIN, method.toUpperCase(java.util.Locale.ROOT).getBytes(StandardCharsets.US_ASCII),
                new byte[]{' '}, path.getBytes(StandardCharsets.UTF_8), new byte[]{0},
                new Wire.Writer().u32(deviceId).u64(nonce).bytes(), digest);
    }

    /** The next nonce: the wall clock in nanoseconds (millisecond resolution on Android), strictly increasing. */
    public synchronized long nextNonce() {
        last = Math.max(System.currentTimeMillis() * 1_000_000L, last + 1);
        return last;
    }

    /** The three authentication headers of a request. */
    public Map<String, String> headers(DeviceIdentity identity, String method, String path, long deviceId,
                                       byte[] body) {
        long nonce = nextNonce();
        Map<String, String> h = new LinkedHashMap<>();
        h.put(HEADER_DEVICE, Long.toString(deviceId));
        h.put(HEADER_NONCE, Long.toString(nonce));
        h.put(HEADER_SIGNATURE, Bytes.hex(identity.sign(signedBytes(method, path, deviceId, nonce, body))));
        return h;
    }
}
