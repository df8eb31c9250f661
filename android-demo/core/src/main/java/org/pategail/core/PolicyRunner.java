package org.pategail.core;

/**
 * The seam in front of ONNX Runtime's inference API for the policy model (on a phone: {@code OrtPolicy}).
 * The device calls {@link #load} on every PolicyUpdate after checking the announced SHA-256.
 */
public interface PolicyRunner {
    /**
     * Load {@code model} as the policy in use, checked against the bundle's policy interface. Throws
     * MessageError with code "incompatible" (not loadable, wrong inputs/outputs) or "non_finite" (NaN or Inf
     * log-probabilities); on a throw the previous policy stays in use.
     */
    void load(byte[] model, Bundle bundle) throws MessageError;

    /** log-probabilities (n, T, 4) of the actions for day prefixes {@code cells} (n, T) with homes (n). */
    float[][][] logProbs(int[][] cells, int[] homes, Bundle bundle);
}
