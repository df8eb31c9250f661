package org.pategail.core.tools;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.json.JSONArray;
import org.json.JSONObject;
import org.pategail.core.Bundle;
import org.pategail.core.BundleException;
import org.pategail.core.Device;
import org.pategail.core.DeviceMessages;
import org.pategail.core.MessageError;
import org.pategail.core.PolicyCheckpoint;
import org.pategail.core.secagg.Bytes;

/**
 * What the Java core makes of a DP-FedAvg bundle and of device-protocol frames, as JSON on stdout, for the
 * cross-language tests in tests/android (the bundle and the frames are written by the Python SDK at test time).
 *
 * <p>{@code bundle DIR}: the bundle's {@code policy_training} description (null when absent); a refused bundle
 * is its one-line reason on stderr and exit status 2. {@code frames}: one hex frame a line on stdin, one JSON
 * line out for each — the fields Java read and its re-encoding, or the refusal's code and ErrorReply.
 * {@code checkpoint-read BUNDLE FILE}: the policy parameters {@link PolicyCheckpoint} reads from an ONNX Runtime
 * checkpoint, as hex of little-endian float32; {@code checkpoint-write BUNDLE OUT}: the bundle's policy checkpoint
 * with the parameters given on stdin (the same hex) written in. A refused checkpoint is one line on stderr and
 * exit status 2.
 */
public final class PolicyTrainingProbe {
    private PolicyTrainingProbe() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("bundle")) {
            Bundle b;
            try {
                b = Bundle.load(new File(args[1]), null);
            } catch (BundleException err) {
                System.err.println(err.getMessage());
                System.exit(2);
                return;
            }
            System.out.println(describe(b.policyTraining));
        } else if (args.length == 1 && args[0].equals("frames")) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                System.out.println(frame(Bytes.unhex(line.trim())));
            }
        } else if (args.length == 3 && (args[0].equals("checkpoint-read") || args[0].equals("checkpoint-write"))) {
            Bundle.PolicyTraining spec;
            try {
                spec = Bundle.load(new File(args[1]), null).policyTraining;
            } catch (BundleException err) {
                System.err.println(err.getMessage());
                System.exit(2);
                return;
            }
            try {
                if (args[0].equals("checkpoint-read")) {
                    float[] flat = PolicyCheckpoint.parse(Bundle.readAll(new File(args[2]))).parameters(spec);
                    System.out.println(Bytes.hex(littleEndian(flat)));
                } else {
                    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
                    byte[] raw = Bytes.unhex(in.readLine().trim());
                    float[] flat = new float[raw.length / 4];
                    java.nio.ByteBuffer.wrap(raw).order(java.nio.ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(flat);
                    byte[] base = Bundle.readAll(spec.checkpoint);
                    Device.writeAtomic(new File(args[2]), PolicyCheckpoint.parse(base).withParameters(spec, flat));
                }
            } catch (IllegalArgumentException err) {
                System.err.println(err.getMessage());
                System.exit(2);
            }
        } else {
            System.err.println("usage: PolicyTrainingProbe bundle DIR | frames | checkpoint-read BUNDLE FILE "
                    + "| checkpoint-write BUNDLE OUT (the parameters as hex on stdin)");
            System.exit(2);
        }
    }

    static byte[] littleEndian(float[] flat) {
        java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(4 * flat.length).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(flat);
        return b.array();
    }

    static Object describe(Bundle.PolicyTraining t) throws Exception {
        if (t == null) {
            return JSONObject.NULL;
        }
        JSONArray params = new JSONArray();
        for (int i = 0; i < t.names.size(); i++) {
            JSONArray shape = new JSONArray();
            for (int d : t.shape(i)) {
                shape.put(d);
            }
            params.put(new JSONArray().put(t.names.get(i)).put(shape));
        }
        JSONObject files = new JSONObject().put("training", t.training.getName()).put("eval", t.eval.getName())
                .put("optimizer", t.optimizer.getName()).put("checkpoint", t.checkpoint.getName());
        return new JSONObject().put("n_parameters", t.nParameters).put("parameters", params).put("files", files)
                .put("learning_rate_scale", t.learningRateScale);
    }

    static JSONObject frame(byte[] data) throws Exception {
        JSONObject out = new JSONObject();
        DeviceMessages.Message m;
        try {
            m = DeviceMessages.fromBytes(data, DeviceMessages.Limits.DEFAULT, 0);
        } catch (MessageError err) {
            DeviceMessages.ErrorReply reply = DeviceMessages.ErrorReply.fromError(DeviceMessages.peekRound(data), err,
                    DeviceMessages.Limits.DEFAULT);
            return out.put("code", err.code).put("message", err.getMessage())
                    .put("reply", Bytes.hex(DeviceMessages.toBytes(reply)));
        }
        out.put("kind", DeviceMessages.kindName(m.kind())).put("round", m.round())
                .put("reencoded", Bytes.hex(DeviceMessages.toBytes(m)));
        if (m instanceof DeviceMessages.FedAvgRequest) {
            DeviceMessages.FedAvgRequest r = (DeviceMessages.FedAvgRequest) m;
            JSONArray params = new JSONArray();
            for (float x : r.parameters) {
                params.put((double) x);
            }
            out.put("epochs", r.epochs).put("batch_size", r.batchSize).put("learning_rate", r.learningRate)
                    .put("clip_norm", r.clipNorm).put("parameters", params);
        } else if (m instanceof DeviceMessages.Ack) {
            DeviceMessages.Ack a = (DeviceMessages.Ack) m;
            out.put("acknowledged", a.kind).put("n", a.n);
        }
        return out;
    }
}
