package org.pategail.core;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * An ONNX Runtime training checkpoint — the flatbuffer its training API reads and writes (file identifier "ODTC",
 * schema {@code ort_training_checkpoint.fbs}) — seen as the policy's trainable parameters: each one's float32 bytes
 * found by name, read out as the flat vector in the bundle's {@code policy_training} order, or replaced in a copy.
 *
 * <p>ONNX Runtime's Java training API can open a session on a checkpoint file and save one, but has no call that
 * reads or sets a session's parameters. A device's DP-FedAvg round therefore goes through files: the round's
 * global parameters written into a copy of the bundle's checkpoint, a session opened on it and trained, its
 * checkpoint saved, and the trained parameters read back from that file ({@link FedAvgRound}).
 *
 * <p>Anything else than a checkpoint of float32 parameters held inline, named and shaped as the bundle declares,
 * is refused with an {@link IllegalArgumentException} naming what is wrong.
 */
public final class PolicyCheckpoint {
    private static final int FLOAT = 1;                   // onnxruntime.fbs.TensorDataType.FLOAT
    private final byte[] data;
    /** Trainable parameter name -> {offset of its raw bytes, their length}. */
    private final Map<String, int[]> raw = new HashMap<>();
    private final Map<String, long[]> dims = new HashMap<>();

    private PolicyCheckpoint(byte[] data) {
        this.data = data;
    }

    /** Read a checkpoint's bytes (kept, not copied). */
    public static PolicyCheckpoint parse(byte[] data) {
        PolicyCheckpoint c = new PolicyCheckpoint(data);
        if (data.length < 8 || !"ODTC".equals(new String(data, 4, 4, StandardCharsets.US_ASCII))) {
            throw new IllegalArgumentException("not an ONNX Runtime training checkpoint (no \"ODTC\" identifier)");
        }
        int root = c.target(0);
        int module = c.tableField(root, 1);
        if (module < 0) {
            throw new IllegalArgumentException("the checkpoint has no module state");
        }
        if (c.boolField(module, 2) || c.boolField(module, 3)) {
            throw new IllegalArgumentException("the checkpoint's parameters are not held in it (nominal or "
                    + "external data)");
        }
        int params = c.tableField(module, 0);
        int n = params < 0 ? 0 : c.u32(params);
        for (int k = 0; k < n; k++) {
            int tensor = c.target(params + 4 + 4 * k);
            String name = c.string(c.tableField(tensor, 0));
            int dimsVec = c.tableField(tensor, 2);
            int nd = dimsVec < 0 ? 0 : c.u32(dimsVec);
            c.check(dimsVec + 4, 8L * nd);                 // before anything is allocated for it
            long[] shape = new long[nd];
            for (int d = 0; d < nd; d++) {
                shape[d] = c.i64(dimsVec + 4 + 8 * d);
            }
            int typeAt = c.scalarAt(tensor, 3);
            if (typeAt < 0 || c.i32(typeAt) != FLOAT) {
                throw new IllegalArgumentException("parameter " + name + " is not float32");
            }
            int externalAt = c.scalarAt(tensor, 6);
            if (externalAt >= 0 && c.i64(externalAt) != -1) {
                throw new IllegalArgumentException("parameter " + name + " is held outside the checkpoint");
            }
            int bytes = c.tableField(tensor, 4);
            if (bytes < 0) {
                throw new IllegalArgumentException("parameter " + name + " has no data");
            }
            int length = c.u32(bytes);
            c.check(bytes + 4, length);
            if (c.raw.put(name, new int[]{bytes + 4, length}) != null) {
                throw new IllegalArgumentException("parameter " + name + " appears twice");
            }
            c.dims.put(name, shape);
        }
        return c;
    }

    /** The trainable parameters as one flat vector, in {@code spec}'s order. */
    public float[] parameters(Bundle.PolicyTraining spec) {
        matches(spec);
        float[] out = new float[Math.toIntExact(spec.nParameters)];
        int at = 0;
        for (int i = 0; i < spec.names.size(); i++) {
            int[] where = locate(spec, i);
            for (int j = 0; j < where[1] / 4; j++) {
                out[at++] = Float.intBitsToFloat(DeviceMessages.getIntLE(data, where[0] + 4 * j));
            }
        }
        return out;
    }

    /** A copy of the checkpoint's bytes with the trainable parameters replaced by {@code flat} ({@code spec}'s
     * order); everything else byte for byte as it was. */
    public byte[] withParameters(Bundle.PolicyTraining spec, float[] flat) {
        if (flat.length != spec.nParameters) {
            throw new IllegalArgumentException(flat.length + " parameters given, the policy has " + spec.nParameters);
        }
        matches(spec);
        byte[] out = data.clone();
        int at = 0;
        for (int i = 0; i < spec.names.size(); i++) {
            int[] where = locate(spec, i);
            for (int j = 0; j < where[1] / 4; j++) {
                DeviceMessages.putIntLE(out, where[0] + 4 * j, Float.floatToRawIntBits(flat[at++]));
            }
        }
        return out;
    }

    /** Refuse a checkpoint whose trainable parameters are not as many as {@code spec}'s, each named once. */
    private void matches(Bundle.PolicyTraining spec) {
        if (raw.size() != spec.names.size() || new java.util.HashSet<>(spec.names).size() != spec.names.size()) {
            throw new IllegalArgumentException("the checkpoint holds " + raw.size() + " trainable parameters, the "
                    + "bundle declares " + spec.names.size() + " (each named once)");
        }
    }

    /** {offset, length} of parameter {@code i} of {@code spec}, checked against its declared name and shape. */
    private int[] locate(Bundle.PolicyTraining spec, int i) {
        String name = spec.names.get(i);
        int[] where = raw.get(name);
        if (where == null) {
            throw new IllegalArgumentException("the checkpoint has no parameter " + name);
        }
        int[] shape = spec.shape(i);
        long[] held = dims.get(name);
        long count = 1;
        boolean same = held.length == shape.length;
        for (int d = 0; d < shape.length; d++) {
            count *= shape[d];
            same = same && held[d] == shape[d];
        }
        if (!same || where[1] != 4 * count) {
            throw new IllegalArgumentException("parameter " + name + " has another shape in the checkpoint than the "
                    + "bundle declares");
        }
        return where;
    }

    // -- flatbuffer reading, every offset checked against the buffer --------------------------------------
    private void check(int at, long length) {
        if (at < 0 || length < 0 || at + length > data.length) {
            throw new IllegalArgumentException("malformed checkpoint (an offset points outside the file)");
        }
    }

    private int i32(int at) {
        check(at, 4);
        return DeviceMessages.getIntLE(data, at);
    }

    private int u32(int at) {
        int v = i32(at);
        if (v < 0) {
            throw new IllegalArgumentException("malformed checkpoint (an offset or length beyond 2 GiB)");
        }
        return v;
    }

    private long i64(int at) {
        check(at, 8);
        return (DeviceMessages.getIntLE(data, at) & 0xffffffffL) | ((long) DeviceMessages.getIntLE(data, at + 4) << 32);
    }

    private int u16(int at) {
        check(at, 2);
        return (data[at] & 0xff) | (data[at + 1] & 0xff) << 8;
    }

    /** The position an unsigned offset stored at {@code at} points to. */
    private int target(int at) {
        long to = (long) at + u32(at);
        check((int) Math.min(to, Integer.MAX_VALUE), 0);
        return (int) to;
    }

    /** Where field {@code slot} of the table at {@code table} is stored; -1 when absent. */
    private int scalarAt(int table, int slot) {
        long vtable = (long) table - i32(table);
        check((int) Math.max(Math.min(vtable, Integer.MAX_VALUE), -1), 4);
        int vsize = u16((int) vtable);
        int entry = 4 + 2 * slot;
        if (entry + 2 > vsize) {
            return -1;
        }
        int off = u16((int) vtable + entry);
        return off == 0 ? -1 : table + off;
    }

    /** The position a table's offset-typed field (table, vector, string) points to; -1 when absent. */
    private int tableField(int table, int slot) {
        int at = scalarAt(table, slot);
        return at < 0 ? -1 : target(at);
    }

    private boolean boolField(int table, int slot) {
        int at = scalarAt(table, slot);
        if (at < 0) {
            return false;
        }
        check(at, 1);
        return data[at] != 0;
    }

    private String string(int at) {
        if (at < 0) {
            throw new IllegalArgumentException("malformed checkpoint (a parameter without a name)");
        }
        int n = u32(at);
        check(at + 4, n);
        return new String(data, at + 4, n, StandardCharsets.UTF_8);
    }
}
