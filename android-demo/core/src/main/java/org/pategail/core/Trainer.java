package org.pategail.core;

import java.io.File;
import java.io.IOException;

/**
 * The seam in front of ONNX Runtime's training API: the discriminator's training session. On a phone this
 * is {@code OrtTrainer} (onnxruntime-training-android: OrtTrainingSession's trainStep, optimizerStep,
 * lazyResetGrad, evalStep); on the JVM in tests, a {@code ReplayTrainer} that replays a reference run.
 */
public interface Trainer {
    /** The ONNX Runtime version behind this trainer (checked against the bundle's "requires" range); null for
     * a trainer that is not ONNX Runtime (the JVM's {@code MlpTrainer}), which checks the declared model itself. */
    String runtimeVersion();

    /** Open the bundle's training artifacts, starting from {@code checkpoint} or, when null, the bundle's. */
    void open(Bundle bundle, File checkpoint) throws IOException;

    /** One optimizer step on a batch (pairs (batch, 15), labels 1 = expert, 0 = generated); the loss before it. */
    float trainStep(float[][] pairs, float[] labels);

    /** D(s, a) in [0, 1] of each pair under the current parameters (the eval model's "prob"). */
    float[] score(float[][] pairs);

    /** Write the parameters and optimizer state so that {@link #open} can resume from them. */
    void saveCheckpoint(File path) throws IOException;
}
