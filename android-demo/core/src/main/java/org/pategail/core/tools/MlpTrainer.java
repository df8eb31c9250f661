package org.pategail.core.tools;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;
import org.pategail.core.Bundle;
import org.pategail.core.Trainer;

/**
 * The discriminator's training session in plain Java, for a device on the JVM, where ONNX Runtime's training
 * API does not exist (on a phone, {@code OrtTrainer} runs the bundle's training artifacts instead). It runs
 * the model the bundle declares — D(s, a) = out(tanh(fc2(tanh(fc1(pairs))))), the manifest's loss
 * mean(relu(z) − z·t + log(1 + exp(−|z|))), AdamW after clipping the gradient's norm (the manifest's
 * "torch_equivalent") — from the parameters of the bundle's inference model, and refuses a bundle that
 * declares another form. Its losses over the vectors' 20 AdamW steps equal ONNX Runtime's within 1e-5
 * ({@code MlpTrainerTest}). Float32 parameters and activations, as the artifacts; sums in float64.
 *
 * <p>Checkpoint: "PGMLP1" | step i64 | for each of params, first moments, second moments: the six tensors in
 * the manifest's order, float32 big-endian.
 */
public final class MlpTrainer implements Trainer {
    static final String LOSS = "mean(relu(logit) - logit * labels + log(1 + exp(-abs(logit))))";
    static final String[] NAMES = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "out.weight", "out.bias"};
    private static final byte[] MAGIC = "PGMLP1".getBytes(StandardCharsets.US_ASCII);

    private int nIn, hidden;
    private float[][] p, m, v;          // the six tensors, flattened row-major
    private long step;
    private double lr, wd, beta1, beta2, eps, maxGradNorm;

    /** Not ONNX Runtime: the bundle's runtime range does not apply; {@link #open} checks the declared model. */
    @Override
    public String runtimeVersion() {
        return null;
    }

    @Override
    public void open(Bundle bundle, File checkpoint) throws IOException {
        JSONObject disc;
        try {
            disc = bundle.manifest.getJSONObject("discriminator");
            JSONObject config = disc.getJSONObject("config"), opt = disc.getJSONObject("optimizer");
            if (!LOSS.equals(disc.getString("loss")) || !"AdamW".equals(opt.getString("type"))) {
                throw new IOException("the bundle's discriminator declares loss '" + disc.getString("loss")
                        + "' with " + opt.getString("type") + "; this trainer runs '" + LOSS + "' with AdamW");
            }
            nIn = config.getInt("n_inputs");
            hidden = config.getInt("hidden");
            lr = opt.getDouble("learning_rate");
            wd = opt.getDouble("weight_decay");
            maxGradNorm = opt.getDouble("max_grad_norm");
            JSONArray betas = opt.getJSONArray("betas");
            beta1 = betas.getDouble(0);
            beta2 = betas.getDouble(1);
            eps = opt.getDouble("eps");
            int[][] shapes = {{hidden, nIn}, {hidden}, {hidden, hidden}, {hidden}, {1, hidden}, {1}};
            JSONArray params = disc.getJSONArray("parameters");
            if (params.length() != NAMES.length) {
                throw new IOException("the bundle's discriminator has " + params.length() + " parameters, not 6");
            }
            for (int i = 0; i < NAMES.length; i++) {
                JSONObject e = params.getJSONObject(i);
                JSONArray shape = e.getJSONArray("shape");
                boolean same = NAMES[i].equals(e.getString("name")) && shape.length() == shapes[i].length;
                for (int j = 0; same && j < shapes[i].length; j++) {
                    same = shape.getInt(j) == shapes[i][j];
                }
                if (!same) {
                    throw new IOException("the bundle's discriminator parameter " + i + " is " + e
                            + ", not the MLP this trainer runs");
                }
            }
        } catch (JSONException err) {
            throw new IOException(bundle.root + ": malformed discriminator section (" + err.getMessage() + ")");
        }
        if (checkpoint == null) {
            Map<String, float[]> init = OnnxInitializers.read(Bundle.readAll(bundle.inference));
            p = new float[NAMES.length][];
            for (int i = 0; i < NAMES.length; i++) {
                p[i] = init.get(NAMES[i]);
                if (p[i] == null || p[i].length != size(i)) {
                    throw new IOException(bundle.inference + ": no float tensor " + NAMES[i] + " of " + size(i)
                            + " values");
                }
            }
            m = zeros();
            v = zeros();
            step = 0;
        } else {
            readCheckpoint(checkpoint);
        }
    }

    private int size(int i) {
        int[] sizes = {hidden * nIn, hidden, hidden * hidden, hidden, hidden, 1};
        return sizes[i];
    }

    private float[][] zeros() {
        float[][] out = new float[NAMES.length][];
        for (int i = 0; i < NAMES.length; i++) {
            out[i] = new float[size(i)];
        }
        return out;
    }

    /** Activations of one forward pass: h1, h2 (B, hidden) and the logits (B). */
    private float[][][] forward(float[][] pairs) {
        int b = pairs.length;
        float[][] h1 = new float[b][hidden], h2 = new float[b][hidden], z = new float[1][b];
        for (int r = 0; r < b; r++) {
            float[] x = pairs[r];
            if (x.length != nIn) {
                throw new IllegalArgumentException("pair " + r + " has " + x.length + " features, not " + nIn);
            }
            for (int j = 0; j < hidden; j++) {
                double s = p[1][j];
                for (int k = 0; k < nIn; k++) {
                    s += (double) p[0][j * nIn + k] * x[k];
                }
                h1[r][j] = (float) Math.tanh((float) s);
            }
            for (int j = 0; j < hidden; j++) {
                double s = p[3][j];
                for (int k = 0; k < hidden; k++) {
                    s += (double) p[2][j * hidden + k] * h1[r][k];
                }
                h2[r][j] = (float) Math.tanh((float) s);
            }
            double s = p[5][0];
            for (int k = 0; k < hidden; k++) {
                s += (double) p[4][k] * h2[r][k];
            }
            z[0][r] = (float) s;
        }
        return new float[][][]{h1, h2, z};
    }

    @Override
    public float trainStep(float[][] pairs, float[] labels) {
        int b = pairs.length;
        float[][][] a = forward(pairs);
        float[][] h1 = a[0], h2 = a[1];
        float[] z = a[2][0];
        double loss = 0;
        double[][] g = new double[NAMES.length][];
        for (int i = 0; i < NAMES.length; i++) {
            g[i] = new double[size(i)];
        }
        double[] dh2 = new double[hidden], dh1 = new double[hidden];
        for (int r = 0; r < b; r++) {
            double x = z[r], t = labels[r];
            loss += Math.max(x, 0) - x * t + Math.log1p(Math.exp(-Math.abs(x)));
            double dz = (1 / (1 + Math.exp(-x)) - t) / b;
            g[5][0] += dz;
            for (int k = 0; k < hidden; k++) {
                g[4][k] += dz * h2[r][k];
                dh2[k] = dz * p[4][k] * (1 - (double) h2[r][k] * h2[r][k]);
                g[3][k] += dh2[k];
            }
            java.util.Arrays.fill(dh1, 0);
            for (int j = 0; j < hidden; j++) {
                for (int k = 0; k < hidden; k++) {
                    g[2][j * hidden + k] += dh2[j] * h1[r][k];
                    dh1[k] += dh2[j] * p[2][j * hidden + k];
                }
            }
            for (int j = 0; j < hidden; j++) {
                double da = dh1[j] * (1 - (double) h1[r][j] * h1[r][j]);
                g[1][j] += da;
                for (int k = 0; k < nIn; k++) {
                    g[0][j * nIn + k] += da * pairs[r][k];
                }
            }
        }
        double norm = 0;
        for (double[] gi : g) {
            for (double x : gi) {
                norm += x * x;
            }
        }
        norm = Math.sqrt(norm);
        double clip = Math.min(1.0, maxGradNorm / (norm + 1e-6));      // torch.nn.utils.clip_grad_norm_
        step++;
        double bc1 = 1 - Math.pow(beta1, step), bc2 = 1 - Math.pow(beta2, step);
        for (int i = 0; i < NAMES.length; i++) {
            for (int k = 0; k < p[i].length; k++) {
                double gk = g[i][k] * clip;
                double w = p[i][k] * (1 - lr * wd);                      // decoupled weight decay (AdamW)
                m[i][k] = (float) (beta1 * m[i][k] + (1 - beta1) * gk);
                v[i][k] = (float) (beta2 * v[i][k] + (1 - beta2) * gk * gk);
                p[i][k] = (float) (w - lr * (m[i][k] / bc1) / (Math.sqrt(v[i][k] / bc2) + eps));
            }
        }
        return (float) (loss / b);
    }

    @Override
    public float[] score(float[][] pairs) {
        float[] z = forward(pairs)[2][0];
        float[] out = new float[z.length];
        for (int i = 0; i < z.length; i++) {
            out[i] = (float) (1 / (1 + Math.exp(-z[i])));
        }
        return out;
    }

    @Override
    public void saveCheckpoint(File path) throws IOException {
        try (DataOutputStream out = new DataOutputStream(
                new java.io.BufferedOutputStream(new FileOutputStream(path)))) {
            out.write(MAGIC);
            out.writeLong(step);
            for (float[][] t : new float[][][]{p, m, v}) {
                for (float[] a : t) {
                    for (float x : a) {
                        out.writeFloat(x);
                    }
                }
            }
        }
    }

    private void readCheckpoint(File path) throws IOException {
        try (DataInputStream in = new DataInputStream(new java.io.BufferedInputStream(new FileInputStream(path)))) {
            byte[] magic = new byte[MAGIC.length];
            in.readFully(magic);
            if (!java.util.Arrays.equals(magic, MAGIC)) {
                throw new IOException(path + ": not an MlpTrainer checkpoint");
            }
            step = in.readLong();
            float[][][] t = {zeros(), zeros(), zeros()};
            for (float[][] tensors : t) {
                for (float[] a : tensors) {
                    for (int k = 0; k < a.length; k++) {
                        a[k] = in.readFloat();
                    }
                }
            }
            if (in.read() != -1) {
                throw new IOException(path + ": longer than an MlpTrainer checkpoint of this bundle");
            }
            p = t[0];
            m = t[1];
            v = t[2];
        } catch (java.io.EOFException err) {
            throw new IOException(path + ": truncated MlpTrainer checkpoint");
        }
    }

    /** The float tensors among an ONNX model's initializers (a minimal protobuf reader: ModelProto.graph,
     * GraphProto.initializer, TensorProto's name, data_type 1 and raw_data or float_data). */
    static final class OnnxInitializers {
        private final byte[] buf;
        private int pos;

        private OnnxInitializers(byte[] buf, int pos) {
            this.buf = buf;
            this.pos = pos;
        }

        static Map<String, float[]> read(byte[] model) throws IOException {
            Map<String, float[]> out = new LinkedHashMap<>();
            try {
                OnnxInitializers r = new OnnxInitializers(model, 0);
                while (r.pos < model.length) {
                    int tag = (int) r.varint();
                    if (tag == (7 << 3 | 2)) {                        // ModelProto.graph
                        byte[] graph = r.bytes();
                        OnnxInitializers g = new OnnxInitializers(graph, 0);
                        while (g.pos < graph.length) {
                            int gtag = (int) g.varint();
                            if (gtag == (5 << 3 | 2)) {               // GraphProto.initializer
                                tensor(g.bytes(), out);
                            } else {
                                g.skip(gtag & 7);
                            }
                        }
                    } else {
                        r.skip(tag & 7);
                    }
                }
            } catch (ArrayIndexOutOfBoundsException | NegativeArraySizeException err) {
                throw new IOException("not an ONNX model (truncated protobuf)");
            }
            return out;
        }

        private static void tensor(byte[] data, Map<String, float[]> out) throws IOException {
            OnnxInitializers t = new OnnxInitializers(data, 0);
            String name = null;
            long type = 0;
            byte[] raw = null;
            ByteArrayOutputStream floats = new ByteArrayOutputStream();
            while (t.pos < data.length) {
                int tag = (int) t.varint();
                int field = tag >>> 3;
                if (field == 8 && (tag & 7) == 2) {
                    name = new String(t.bytes(), StandardCharsets.UTF_8);
                } else if (field == 2 && (tag & 7) == 0) {
                    type = t.varint();
                } else if (field == 9 && (tag & 7) == 2) {
                    raw = t.bytes();
                } else if (field == 4 && (tag & 7) == 2) {       // packed float_data (little-endian)
                    byte[] b = t.bytes();
                    floats.write(b, 0, b.length);
                } else if (field == 4 && (tag & 7) == 5) {
                    floats.write(t.buf, t.pos, 4);
                    t.pos += 4;
                } else {
                    t.skip(tag & 7);
                }
            }
            if (name == null || type != 1) {
                return;                                       // only float32 tensors are parameters
            }
            byte[] le = raw != null ? raw : floats.toByteArray();
            float[] values = new float[le.length / 4];
            for (int i = 0; i < values.length; i++) {
                values[i] = Float.intBitsToFloat((le[4 * i] & 0xFF) | (le[4 * i + 1] & 0xFF) << 8
                        | (le[4 * i + 2] & 0xFF) << 16 | (le[4 * i + 3] & 0xFF) << 24);
            }
            out.put(name, values);
        }

        private long varint() throws IOException {
            long v = 0;
            for (int shift = 0; shift < 64; shift += 7) {
                int b = buf[pos++] & 0xFF;
                v |= (long) (b & 0x7F) << shift;
                if (b < 0x80) {
                    return v;
                }
            }
            throw new IOException("not an ONNX model (bad varint)");
        }

        private byte[] bytes() throws IOException {
            int n = (int) varint();
            if (n < 0 || pos + n > buf.length) {
                throw new IOException("not an ONNX model (truncated field)");
            }
            byte[] out = java.util.Arrays.copyOfRange(buf, pos, pos + n);
            pos += n;
            return out;
        }

        private void skip(int wireType) throws IOException {
            switch (wireType) {
                case 0:
                    varint();
                    break;
                case 1:
                    pos += 8;
                    break;
                case 2: {
                    int n = (int) varint();     // read before adding: varint() moves pos
                    pos += n;
                    break;
                }
                case 5:
                    pos += 4;
                    break;
                default:
                    throw new IOException("not an ONNX model (wire type " + wireType + ")");
            }
        }
    }
}
