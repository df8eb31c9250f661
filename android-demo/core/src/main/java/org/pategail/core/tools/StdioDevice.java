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
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.pategail.core.Device;
import org.pategail.core.DeviceMessages;
import org.pategail.core.DeviceSession;
import org.pategail.core.PolicyTrainer;
import org.pategail.core.secagg.Wire;

/**
 * The Java device as a JVM process serving a {@link DeviceSession} on stdin/stdout, so a Python coordinator
 * can run it as one device of a real round ({@code pategail.jvm_device}). Besides the coordinator's
 * operations it answers local ones that on a phone are the app's own doing: install a bundle from a path,
 * add days; and, for benchmarks and tests only, upload caller-given scores (the Python SDK's
 * {@code SecAggClient.masked_input(delivery, scores)}) and report the serving thread's CPU time
 * (java.lang.management: JVM only, which is why this class is left out of the Android build).
 *
 * <p>Usage: {@code StdioDevice --root DIR --id N --replay FILE [--seed S] [--policy-trainer PYTHON
 * [--policy-trainer-log DIR]]} — with {@code --policy-trainer}, the device trains the policy in DP-FedAvg rounds
 * through {@link ProcessPolicyTrainer} (ONNX Runtime in {@code PYTHON -m pategail.jvm_policy_trainer}).
 */
public final class StdioDevice extends DeviceSession {
    public static final int OP_INSTALL_BUNDLE = 3, OP_ADD_DAYS = 4, OP_MASKED_SCORES = 15, OP_CPU_NANOS = 16;

    StdioDevice(Device device) {
        super(device, null);
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
        PolicyTrainer policyTrainer = null;
        if (opts.containsKey("--policy-trainer")) {
            List<String> command = new ArrayList<>(Arrays.asList(opts.get("--policy-trainer"), "-m",
                    "pategail.jvm_policy_trainer"));
            if (opts.containsKey("--policy-trainer-log")) {
                command.addAll(Arrays.asList("--log", opts.get("--policy-trainer-log")));
            }
            policyTrainer = new ProcessPolicyTrainer(command);
        }
        Device device = new Device(new File(opts.get("--root")), Long.parseLong(opts.get("--id")),
                new Random(Long.parseLong(opts.getOrDefault("--seed", "0"))), DeviceMessages.Limits.DEFAULT,
                new ReplayTrainer(new File(opts.get("--replay")), 1e-6), null, policyTrainer, new SecureRandom());
        StdioDevice session = new StdioDevice(device);
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in));
        DataOutputStream out = new DataOutputStream(new BufferedOutputStream(System.out));
        while (true) {
            int op;
            try {
                op = in.readUnsignedByte();
            } catch (EOFException eof) {
                return;                          // the coordinator closed the pipe: the device leaves
            }
            byte[] payload = new byte[in.readInt()];
            in.readFully(payload);
            out.write(session.serve(op, payload).toBytes());
            out.flush();
        }
    }

    @Override
    protected byte[] dispatch(int op, byte[] payload) throws Exception {
        Wire.Reader r = new Wire.Reader(payload);
        switch (op) {
            case OP_INSTALL_BUNDLE:
                return device.installBundle(new File(new String(payload, StandardCharsets.UTF_8)), null).sha256
                        .getBytes(StandardCharsets.US_ASCII);
            case OP_ADD_DAYS:
                return new Wire.Writer().u32(device.addDays(Device.daysFromBytes(payload))).bytes();
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
            default:
                return super.dispatch(op, payload);
        }
    }
}
