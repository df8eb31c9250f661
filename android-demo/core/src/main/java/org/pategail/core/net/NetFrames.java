package org.pategail.core.net;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.Crypto;
import org.pategail.core.secagg.DeviceIdentity;
import org.pategail.core.secagg.SecAggException;
import org.pategail.core.secagg.Wire;

/**
 * The frames between a device and the coordinator's service (the Python SDK's {@code pategail.sdk.net.frames}):
 * MAGIC "PGNT" | version u8 | kind u8 | body length u32 | body | signature length u8 | Ed25519 signature over
 * "pategail-net-v1/frame" and everything before the length byte. The device makes an {@link #enrolment} and a
 * {@link #pong}; it reads an {@link Enrolled} and {@link Order}s, each checked against the coordinator's key.
 * (The key directory, kind 3, is {@code KeyDirectory.fromSignedBytes}.)
 */
public final class NetFrames {
    public static final byte[] MAGIC = {'P', 'G', 'N', 'T'};
    public static final int VERSION = 1;
    public static final int KIND_ENROLMENT = 1, KIND_ENROLLED = 2, KIND_DIRECTORY = 3, KIND_ORDER = 4, KIND_PONG = 5;
    /** Enrolment: "give me any free id". */
    public static final long ANY_ID = 0xFFFFFFFFL;
    public static final String WORK_REQUEST = "request", WORK_PING = "ping", WORK_BUNDLE = "bundle";
    /** Order work by index: a device-protocol request, the five secure-aggregation steps, a liveness check, and
     * "install the bundle the service now serves" (its SHA-256 in hex: a privately released cell table's). */
    public static final List<String> WORKS = Collections.unmodifiableList(Arrays.asList(
            WORK_REQUEST, "advertise", "share", "input", "ack", "unmask", WORK_PING, WORK_BUNDLE));
    public static final int MAX_PARTS = 4;
    private static final byte[] DOMAIN = "pategail-net-v1/frame".getBytes(StandardCharsets.US_ASCII);

    private NetFrames() {
    }

    private static byte[] frame(int kind, byte[] body, DeviceIdentity signer) {
        return Wire.frame(MAGIC, VERSION, kind, body, head -> signer.sign(Bytes.concat(DOMAIN, head)));
    }

    private static Wire.Unframed unframe(byte[] data, int kind) throws SecAggException {
        Wire.Unframed f = Wire.unframe(data, MAGIC, VERSION, kind);
        if (f.signature.length != Crypto.SIGNATURE_BYTES) {
            throw SecAggException.rejected("unsigned frame");
        }
        return f;
    }

    private static Wire.Reader verified(byte[] data, int kind, byte[] publicKey) throws SecAggException {
        Wire.Unframed f = unframe(data, kind);
        if (!Crypto.verify(publicKey, f.signature, Bytes.concat(DOMAIN, f.signed))) {
            throw SecAggException.rejected("bad signature");
        }
        return new Wire.Reader(f.body);
    }

    /** The device's public keys and the id it asks for, signed with the signing key it enrols. */
    public static byte[] enrolment(DeviceIdentity identity, long requestedId) {
        byte[] body = new Wire.Writer().raw(identity.signingPublic).raw(identity.envelopePublic).u32(requestedId)
                .bytes();
        return frame(KIND_ENROLMENT, body, identity);
    }

    /** The answer to a liveness order {@code seq}, signed by the device. */
    public static byte[] pong(DeviceIdentity identity, long deviceId, long seq) {
        return frame(KIND_PONG, new Wire.Writer().u32(deviceId).u64(seq).bytes(), identity);
    }

    /** The service's answer to an enrolment. */
    public static final class Enrolled {
        public final long deviceId;
        /** The coordinator's Ed25519 public key: signs every Enrolled, Directory and Order frame. */
        public final byte[] coordinator;
        /** SHA-256 (hex) of the run's bundle manifest: the device installs exactly this bundle. */
        public final String bundleSha256;

        private Enrolled(long deviceId, byte[] coordinator, String bundleSha256) {
            this.deviceId = deviceId;
            this.coordinator = coordinator;
            this.bundleSha256 = bundleSha256;
        }

        /** Parsed and checked against the {@code pinned} coordinator key (null: trust the key inside, on first use). */
        public static Enrolled fromBytes(byte[] data, byte[] pinned) throws SecAggException {
            Wire.Reader r = new Wire.Reader(unframe(data, KIND_ENROLLED).body);
            long id = r.u32();
            byte[] coordinator = r.raw(32);
            String sha = Bytes.hex(r.raw(32));
            r.done();
            if (pinned != null && !Arrays.equals(coordinator, pinned)) {
                throw SecAggException.rejected("the service's coordinator key is not the one this device is pinned to");
            }
            verified(data, KIND_ENROLLED, coordinator);
            return new Enrolled(id, coordinator, sha);
        }
    }

    /** One piece of work for one device, signed by the coordinator, with a sequence number that must increase. */
    public static final class Order {
        public final long deviceId;
        public final long seq;
        public final String work;
        public final byte[][] parts;

        private Order(long deviceId, long seq, String work, byte[][] parts) {
            this.deviceId = deviceId;
            this.seq = seq;
            this.work = work;
            this.parts = parts;
        }

        /** Parsed and checked: signed by {@code coordinator}, addressed to {@code deviceId}. */
        public static Order fromBytes(byte[] data, byte[] coordinator, long deviceId) throws SecAggException {
            Wire.Reader r = verified(data, KIND_ORDER, coordinator);
            long to = r.u32(), seq = r.u64();
            int work = r.u8(), n = r.u8();
            if (to != deviceId) {
                throw SecAggException.rejected("an order for device " + to + ", not " + deviceId);
            }
            if (work >= WORKS.size() || n > MAX_PARTS) {
                throw SecAggException.rejected("unknown work or too many parts");
            }
            byte[][] parts = new byte[n][];
            for (int i = 0; i < n; i++) {
                parts[i] = r.blob(1 << 26);
            }
            r.done();
            return new Order(to, seq, WORKS.get(work), parts);
        }
    }
}
