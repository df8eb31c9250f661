package org.pategail.core.tools;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;

import org.pategail.core.Device;
import org.pategail.core.DeviceMessages;
import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.KeyDirectory;
import org.pategail.core.secagg.SecAggClient;
import org.pategail.core.secagg.SecAggException;
import org.pategail.core.secagg.Wire;

/**
 * The Java device as a process: requests on stdin, replies on stdout, so a Python coordinator can run it
 * as one device of a real round ({@code pategail.jvm_device}). Every payload is one of the SDK's own
 * frames; around it: request = op u8 | length u32 | payload, reply = status u8 | length u32 | payload
 * (status 0 ok, 1 message rejected, 2 protocol error, 3 refused unmask, 4 abort, 5 failure; the payload of
 * a non-zero status is the one-line reason in UTF-8).
 *
 * <p>Two operations exist for benchmarks and tests only: {@code OP_MASKED_SCORES} uploads scores given by the
 * caller (the Python SDK's {@code SecAggClient.masked_input(delivery, scores)}), and {@code OP_CPU_NANOS}
 * reports the CPU time this serving thread has used (java.lang.management: a JVM tool, not app code).
 *
 * <p>Usage: {@code StdioDevice --root DIR --id N --replay FILE [--seed S]}
 */
public final class StdioDevice {
    public static final int OP_PUBLIC_KEYS = 1, OP_DIRECTORY = 2, OP_INSTALL_BUNDLE = 3, OP_ADD_DAYS = 4,
            OP_DEVICE_MESSAGE = 5, OP_START_ROUND = 10, OP_SHARE_KEYS = 11, OP_MASKED_INPUT = 12,
            OP_CONSISTENCY = 13, OP_UNMASK = 14, OP_MASKED_SCORES = 15, OP_CPU_NANOS = 16;

    private final Device device;
    private KeyDirectory directory;

    StdioDevice(Device device) {
        this.device = device;
    }

    public static void main(String[] args) throws IOException {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opts.put(args[i], args[i + 1]);
        }
        for (String required : new String[]{"--root", "--id", "--replay"}) {
            if (!opts.containsKey(required)) {
                System.err.println("usage: StdioDevice --root DIR --id N --replay FILE [--seed S] (missing " + required + ")");
                System.exit(2);
            }
        }
        Device device = new Device(new File(opts.get("--root")), Long.parseLong(opts.get("--id")),
                new Random(Long.parseLong(opts.getOrDefault("--seed", "0"))), DeviceMessages.Limits.DEFAULT,
                new ReplayTrainer(new File(opts.get("--replay")), 1e-6), null, new SecureRandom());
        new StdioDevice(device).serve(new DataInputStream(new BufferedInputStream(System.in)),
                new DataOutputStream(new BufferedOutputStream(System.out)));
    }

    void serve(DataInputStream in, DataOutputStream out) throws IOException {
        while (true) {
            int op;
            try {
                op = in.readUnsignedByte();
            } catch (EOFException eof) {
                return;                          // the coordinator closed the pipe: the device leaves
            }
            byte[] payload = new byte[in.readInt()];
            in.readFully(payload);
            int status = 0;
            byte[] reply;
            try {
                reply = dispatch(op, payload);
            } catch (SecAggException err) {
                status = 1 + err.kind().ordinal();
                reply = err.getMessage().getBytes(StandardCharsets.UTF_8);
            } catch (RuntimeException | IOException | org.pategail.core.BundleException err) {
                status = 5;
                reply = (err.getClass().getSimpleName() + ": " + err.getMessage()
                        + (err.getCause() != null ? " (" + err.getCause().getMessage() + ")" : ""))
                        .getBytes(StandardCharsets.UTF_8);
            }
            out.writeByte(status);
            out.writeInt(reply.length);
            out.write(reply);
            out.flush();
        }
    }

    private SecAggClient client() throws SecAggException {
        if (directory == null) {
            throw SecAggException.protocol("no key directory yet");
        }
        return device.secagg(directory);
    }

    private byte[] dispatch(int op, byte[] payload) throws SecAggException, IOException,
            org.pategail.core.BundleException {
        Wire.Reader r = new Wire.Reader(payload);
        switch (op) {
            case OP_PUBLIC_KEYS:
                return Bytes.concat(device.identity().signingPublic, device.identity().envelopePublic);
            case OP_DIRECTORY: {
                byte[] coordinator = r.raw(32);
                long n = r.u32();
                Map<Long, KeyDirectory.DeviceKeys> devices = new HashMap<>();
                for (long i = 0; i < n; i++) {
                    long id = r.u32();
                    devices.put(id, new KeyDirectory.DeviceKeys(r.raw(32), r.raw(32)));
                }
                r.done();
                directory = new KeyDirectory(coordinator, devices);
                return new byte[0];
            }
            case OP_INSTALL_BUNDLE:
                return device.installBundle(new File(new String(payload, StandardCharsets.UTF_8)), null).sha256
                        .getBytes(StandardCharsets.US_ASCII);
            case OP_ADD_DAYS: {
                int per = 4 * DeviceMessages.SLOTS;
                if (payload.length % per != 0) {
                    throw new IllegalArgumentException("days payload of " + payload.length + " bytes");
                }
                int[][] days = new int[payload.length / per][DeviceMessages.SLOTS];
                for (int i = 0; i < days.length; i++) {
                    for (int t = 0; t < DeviceMessages.SLOTS; t++) {
                        int at = i * per + 4 * t;
                        days[i][t] = (payload[at] & 0xFF) | ((payload[at + 1] & 0xFF) << 8)
                                | ((payload[at + 2] & 0xFF) << 16) | ((payload[at + 3] & 0xFF) << 24);
                    }
                }
                return new Wire.Writer().u32(device.addDays(days)).bytes();
            }
            case OP_DEVICE_MESSAGE:
                return device.handle(payload);
            case OP_START_ROUND: {
                byte[] config = r.blob(1 << 26), envelope = r.blob(1 << 16);
                r.done();
                return client().startRound(config, envelope);
            }
            case OP_SHARE_KEYS:
                return client().shareKeys(payload);
            case OP_MASKED_INPUT:
                client();
                return device.maskedInput(payload);
            case OP_MASKED_SCORES: {
                byte[] delivery = r.blob(1 << 26);
                long m = r.u32();
                double[] scores = new double[(int) m];
                for (int i = 0; i < m; i++) {
                    scores[i] = r.f64();
                }
                r.done();
                return client().maskedInput(delivery, scores);
            }
            case OP_CPU_NANOS:
                return new Wire.Writer().u64(java.lang.management.ManagementFactory.getThreadMXBean()
                        .getCurrentThreadCpuTime()).bytes();
            case OP_CONSISTENCY:
                return client().consistencyCheck(payload);
            case OP_UNMASK:
                return client().unmask(payload);
            default:
                throw new IllegalArgumentException("unknown operation " + op);
        }
    }
}
