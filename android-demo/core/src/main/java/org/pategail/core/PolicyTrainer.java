package org.pategail.core;

import java.io.File;
import java.io.IOException;

/**
 * The seam in front of ONNX Runtime's training API for the policy's maximum-likelihood artifacts (the bundle's
 * {@code policy_training} models; DP-FedAvg rounds). On a phone this is {@code OrtPolicyTrainer}
 * (onnxruntime-training-android: an OrtTrainingSession opened on a checkpoint file, setLearningRate, trainStep,
 * optimizerStep, lazyResetGrad, saveCheckpoint); on the JVM, where that API does not exist, a trainer that hands
 * the same calls to ONNX Runtime in another process ({@code tools/ProcessPolicyTrainer}).
 *
 * <p>Parameters go in and out through checkpoint files only ({@link PolicyCheckpoint}): the Java training API
 * has no call that reads or sets a session's parameters.
 */
public interface PolicyTrainer {
    /** Open a session on {@code bundle}'s policy training models, starting from the checkpoint at {@code checkpoint}. */
    void open(Bundle bundle, File checkpoint) throws IOException;

    /** One SGD step on {@code batch} at {@code learningRate}; the batch's mean negative log-likelihood before it.
     * (The bundle's optimizer model runs at that rate times {@link Bundle.PolicyTraining#learningRateScale}.) */
    float trainStep(FedAvgRound.Batch batch, float learningRate) throws IOException;

    /** Write the session's parameters (no optimizer state) as a checkpoint at {@code path}. */
    void saveCheckpoint(File path) throws IOException;

    /** Release the session (a no-op when none is open). */
    void close();
}
