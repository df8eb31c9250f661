package org.pategail.core;

import java.nio.charset.StandardCharsets;

import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.KeyDirectory;
import org.pategail.core.secagg.SecAggClient;
import org.pategail.core.secagg.SecAggException;
import org.pategail.core.secagg.Wire;

/**
 * What a coordinator may ask a device, over any byte transport (a pipe in the tests, HTTP in the app):
 * request = op u8 | length u32 | payload, reply = status u8 | length u32 | payload. Payloads are the SDK's
 * own frames. Status 0 is a reply frame; 1–4 the secure-aggregation refusals (message rejected, protocol
 * error, refused unmask, abort); 5 a failure, with a one-line reason.
 *
 * <p>The coordinator's signing key is pinned when the session is made (at enrolment, out of band), or else
 * on first use. A key directory is accepted only as the coordinator-signed frame of the Python SDK's
 * {@code directory_to_bytes}, signed by the pinned key and naming it: anything else (unsigned, a bad
 * signature, another coordinator) is a rejected message (status 1) and leaves the directory as it was.
 */
public class DeviceSession {
    public static final int OP_PUBLIC_KEYS = 1, OP_DIRECTORY = 2, OP_DEVICE_MESSAGE = 5, OP_START_ROUND = 10,
            OP_SHARE_KEYS = 11, OP_MASKED_INPUT = 12, OP_CONSISTENCY = 13, OP_UNMASK = 14;
    public static final int OK = 0, FAILED = 5;

    protected final Device device;
    private byte[] pinnedCoordinator;
    private KeyDirectory directory;

    /** @param pinnedCoordinator the coordinator's Ed25519 key, or null to pin the key of the first directory
     *                          (which must be signed by the key it names) */
    public DeviceSession(Device device, byte[] pinnedCoordinator) {
        this.device = device;
        this.pinnedCoordinator = pinnedCoordinator == null ? null : pinnedCoordinator.clone();
    }

    /** A reply: status and payload. */
    public static final class Reply {
        public final int status;
        public final byte[] payload;

        public Reply(int status, byte[] payload) {
            this.status = status;
            this.payload = payload;
        }

        /** status u8 | length u32 | payload. */
        public byte[] toBytes() {
            return new Wire.Writer().u8(status).u32(payload.length).raw(payload).bytes();
        }
    }

    /** Carry out one request; never throws for a bad request (the reply says what went wrong). */
    public Reply serve(int op, byte[] payload) {
        try {
            return new Reply(OK, dispatch(op, payload));
        } catch (SecAggException err) {
            return new Reply(1 + err.kind().ordinal(), err.getMessage().getBytes(StandardCharsets.UTF_8));
        } catch (Exception err) {         // a failure of this device: reported, the session goes on
            String cause = err.getCause() != null ? " (" + err.getCause().getMessage() + ")" : "";
            return new Reply(FAILED, (err.getClass().getSimpleName() + ": " + err.getMessage() + cause)
                    .getBytes(StandardCharsets.UTF_8));
        }
    }

    protected SecAggClient client() throws SecAggException {
        if (directory == null) {
            throw SecAggException.protocol("no key directory yet");
        }
        return device.secagg(directory);
    }

    /** A secure-aggregation step through {@link Device#secaggStep}: only typed refusals come out of it. */
    private byte[] step(String name, byte[]... frames) throws SecAggException {
        client();
        return device.secaggStep(directory, name, frames);
    }

    /** The device's reply to {@code op}; subclasses add local operations. */
    protected byte[] dispatch(int op, byte[] payload) throws Exception {
        Wire.Reader r = new Wire.Reader(payload);
        switch (op) {
            case OP_PUBLIC_KEYS:
                return Bytes.concat(device.identity().signingPublic, device.identity().envelopePublic);
            case OP_DIRECTORY: {
                // only the coordinator-signed directory frame (the Python SDK's directory_to_bytes): whoever
                // speaks on the transport cannot swap in other devices' keys
                byte[] coordinator = pinnedCoordinator;
                if (coordinator == null) {       // trust on first use: the key the first directory names
                    Wire.Unframed f = Wire.unframe(payload, KeyDirectory.NET_MAGIC, KeyDirectory.NET_VERSION,
                            KeyDirectory.KIND_DIRECTORY);
                    coordinator = new Wire.Reader(f.body).raw(32);
                }
                directory = KeyDirectory.fromSignedBytes(payload, coordinator);
                pinnedCoordinator = coordinator;
                return new byte[0];
            }
            case OP_DEVICE_MESSAGE:
                return device.handle(payload);
            case OP_START_ROUND: {
                byte[] config = r.blob(1 << 26), envelope = r.blob(1 << 16);
                r.done();
                return step("advertise", config, envelope);
            }
            case OP_SHARE_KEYS:
                return step("share", payload);
            case OP_MASKED_INPUT:
                return step("input", payload);
            case OP_CONSISTENCY:
                return step("ack", payload);
            case OP_UNMASK:
                return step("unmask", payload);
            default:
                throw new IllegalArgumentException("unknown operation " + op);
        }
    }
}
