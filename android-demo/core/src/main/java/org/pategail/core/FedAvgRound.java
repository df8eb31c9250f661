package org.pategail.core;

import java.io.File;
import java.io.IOException;
import java.util.Random;

/**
 * A device's round of DP-FedAvg (user-level, McMahan et al. 2018), as the Python SDK's
 * {@code pategail.sdk.fedavg_round} does it: local maximum-likelihood epochs of the policy on the owner's own
 * labelled days, from the coordinator's global parameters θ, then Δ = θ_local − θ, clipped to L2 norm
 * {@code clipNorm} here on the device; the pending vector is Δ / clipNorm (entries in [−1, 1], norm ≤ 1), the
 * signed vector of the Gaussian secure aggregation that follows.
 *
 * <p>Minibatches are {@code batchSize} days of a shuffled pass, shuffled with the device's own generator (so a
 * Java device passes over its days in another order than a Python one with the same seed).
 */
public final class FedAvgRound {
    static final int SLOTS = DeviceMessages.SLOTS;
    static final int DECISIONS = SLOTS - 1;
    static final int ROUND_CHECKPOINT = 0, TRAINED_CHECKPOINT = 1;
    static final String[] CHECKPOINT_FILES = {"policy.round.ckpt", "policy.trained.ckpt"};

    private FedAvgRound() {
    }

    /** Model inputs of a batch of days, flat in row-major order: cells (b, 48) int64, features (b, 48, 11)
     * float32, mask (b, 47, 4) bool, targets (b, 47, 4) one-hot float32 — the bundle's MLE input names. */
    public static final class Batch {
        public final int size;
        public final long[] cells;
        public final float[] features;
        public final boolean[] mask;
        public final float[] targets;

        Batch(int size) {
            this.size = size;
            cells = new long[size * SLOTS];
            features = new float[size * SLOTS * Features.N_STATE_FEATURES];
            mask = new boolean[size * DECISIONS * Features.N_ACTIONS];
            targets = new float[size * DECISIONS * Features.N_ACTIONS];
        }
    }

    /** The owner's days as maximum-likelihood inputs: each move labelled with the EPR action that explains it. */
    public static final class LabelledDays {
        private final Batch all;

        LabelledDays(int[][] days, int home, double[][] cells) {
            all = new Batch(days.length);
            int f = SLOTS * Features.N_STATE_FEATURES, d = DECISIONS * Features.N_ACTIONS;
            for (int i = 0; i < days.length; i++) {
                int[] day = days[i];
                float[][] states = Features.stateFeatures(day, home, cells, SLOTS);
                boolean[][] possible = Features.actionMask(day, home);
                byte[] actions = Features.labelActions(day, home);
                for (int t = 0; t < SLOTS; t++) {
                    all.cells[i * SLOTS + t] = day[t];
                    System.arraycopy(states[t], 0, all.features, i * f + t * Features.N_STATE_FEATURES,
                            Features.N_STATE_FEATURES);
                }
                for (int t = 0; t < DECISIONS; t++) {
                    for (int a = 0; a < Features.N_ACTIONS; a++) {
                        all.mask[i * d + t * Features.N_ACTIONS + a] = possible[t][a];
                    }
                    all.targets[i * d + t * Features.N_ACTIONS + actions[t]] = 1f;
                }
            }
        }

        public int size() {
            return all.size;
        }

        /** The rows {@code rows} as one batch. */
        public Batch take(int[] rows) {
            Batch b = new Batch(rows.length);
            int f = SLOTS * Features.N_STATE_FEATURES, d = DECISIONS * Features.N_ACTIONS;
            for (int k = 0; k < rows.length; k++) {
                int i = rows[k];
                System.arraycopy(all.cells, i * SLOTS, b.cells, k * SLOTS, SLOTS);
                System.arraycopy(all.features, i * f, b.features, k * f, f);
                System.arraycopy(all.mask, i * d, b.mask, k * d, d);
                System.arraycopy(all.targets, i * d, b.targets, k * d, d);
            }
            return b;
        }
    }

    /** {@code days} (on the bundle's cell table) labelled for the policy's maximum-likelihood training. */
    public static LabelledDays labelled(int[][] days, int home, double[][] cells) {
        return new LabelledDays(days, home, cells);
    }

    /**
     * θ_local − θ (float64) after {@code epochs} shuffled passes of SGD over {@code data} in minibatches of
     * {@code batchSize} days, from θ = {@code theta}: θ written into a copy of the bundle's policy checkpoint in
     * {@code work} (the device's private directory), the trainer opened on it and trained, its checkpoint saved
     * and read back. The round's checkpoint files are removed afterwards, whatever happens.
     */
    public static double[] localUpdate(PolicyTrainer trainer, Bundle bundle, File work, LabelledDays data,
                                       float[] theta, int epochs, int batchSize, double learningRate, Random rng)
            throws IOException {
        Bundle.PolicyTraining spec = bundle.policyTraining;
        File start = new File(work, CHECKPOINT_FILES[ROUND_CHECKPOINT]);
        File trained = new File(work, CHECKPOINT_FILES[TRAINED_CHECKPOINT]);
        try {
            Device.writeAtomic(start, withParameters(spec.checkpoint, spec, theta));
            trainer.open(bundle, start);
            int n = data.size();
            int[] order = new int[n];
            for (int i = 0; i < n; i++) {
                order[i] = i;
            }
            for (int e = 0; e < epochs; e++) {
                for (int i = n - 1; i > 0; i--) {         // Fisher-Yates
                    int j = rng.nextInt(i + 1);
                    int swap = order[i];
                    order[i] = order[j];
                    order[j] = swap;
                }
                for (int lo = 0; lo < n; lo += batchSize) {
                    int[] rows = java.util.Arrays.copyOfRange(order, lo, Math.min(n, lo + batchSize));
                    trainer.trainStep(data.take(rows), (float) learningRate);
                }
            }
            trainer.saveCheckpoint(trained);
            float[] after = parameters(trained, spec);
            double[] delta = new double[after.length];
            for (int i = 0; i < after.length; i++) {
                delta[i] = (double) after[i] - (double) theta[i];
            }
            return delta;
        } finally {
            trainer.close();
            removeFiles(work);
        }
    }

    /** Remove a round's checkpoint files from {@code work}: the round's parameters and the trained ones (a local
     * model of the owner's days, never to outlive its round), and a half-written one. */
    static void removeFiles(File work) {
        for (String name : CHECKPOINT_FILES) {
            new File(work, name).delete();
            new File(work, "." + name + ".tmp").delete();
        }
    }

    /** The checkpoint at {@code base} with {@code theta} written in; a checkpoint unlike the bundle's declaration
     * is an IOException. */
    private static byte[] withParameters(File base, Bundle.PolicyTraining spec, float[] theta) throws IOException {
        try {
            return PolicyCheckpoint.parse(Bundle.readAll(base)).withParameters(spec, theta);
        } catch (IllegalArgumentException err) {
            throw new IOException(base.getName() + ": " + err.getMessage());
        }
    }

    /** The parameters held in the checkpoint at {@code path}, as {@link #withParameters} checks them. */
    private static float[] parameters(File path, Bundle.PolicyTraining spec) throws IOException {
        try {
            return PolicyCheckpoint.parse(Bundle.readAll(path)).parameters(spec);
        } catch (IllegalArgumentException err) {
            throw new IOException(path.getName() + ": " + err.getMessage());
        }
    }

    /** Δ scaled down to L2 norm {@code clipNorm} when longer; IllegalArgumentException when not finite. */
    public static double[] clip(double[] delta, double clipNorm) {
        double squares = 0;
        for (double v : delta) {
            if (!Double.isFinite(v)) {
                throw new IllegalArgumentException("the local update is not finite (a learning rate too large?)");
            }
            squares += v * v;
        }
        double norm = Math.sqrt(squares);
        double[] out = delta.clone();
        if (norm > clipNorm) {
            for (int i = 0; i < out.length; i++) {
                out[i] = delta[i] * (clipNorm / norm);
            }
        }
        return out;
    }

    /** The pending vector of a DP-FedAvg round: the clipped Δ over {@code clipNorm}; the coordinator scales the
     * released sum back by {@code clipNorm}. */
    public static double[] upload(double[] delta, double clipNorm) {
        double[] out = clip(delta, clipNorm);
        for (int i = 0; i < out.length; i++) {
            out[i] /= clipNorm;
        }
        return out;
    }
}
