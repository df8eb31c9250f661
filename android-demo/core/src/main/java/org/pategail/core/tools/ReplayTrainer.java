package org.pategail.core.tools;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;
import org.pategail.core.Bundle;
import org.pategail.core.Trainer;

/**
 * A {@link Trainer} for the JVM, where ONNX Runtime's training API does not exist: it replays a reference
 * run of the Python SDK (the losses of its training steps and the scores of its generated pairs), and checks
 * what the Java device hands it against that run — the generated pairs' features must equal the reference's
 * within {@code tolerance}, and the number of steps must match — so a cross-language test of the protocol
 * also tests the Java feature code. It learns nothing: on a phone, {@code OrtTrainer} takes its place.
 *
 * <p>Replay file (JSON): {"runtime": "1.19.2", "rounds": [{"pairs": [[15 floats], ...], "prob": [...],
 * "losses": [...]}, ...]}, one entry per RoundRequest in order.
 */
public final class ReplayTrainer implements Trainer {
    private final JSONArray rounds;
    private final String runtime;
    private final double tolerance;
    private int round;
    private int step;

    public ReplayTrainer(File replay, double tolerance) throws IOException {
        try {
            JSONObject o = new JSONObject(new String(Bundle.readAll(replay), StandardCharsets.UTF_8));
            this.rounds = o.getJSONArray("rounds");
            this.runtime = o.getString("runtime");
        } catch (JSONException err) {
            throw new IOException(replay + ": not a replay file (" + err.getMessage() + ")");
        }
        this.tolerance = tolerance;
    }

    @Override
    public String runtimeVersion() {
        return runtime;
    }

    @Override
    public void open(Bundle bundle, File checkpoint) throws IOException {
        step = 0;
        if (checkpoint != null) {
            String text = new String(Bundle.readAll(checkpoint), StandardCharsets.US_ASCII).trim();
            try {
                round = Integer.parseInt(text);
            } catch (NumberFormatException err) {
                throw new IOException(checkpoint + ": not a replay checkpoint");
            }
        }
    }

    private JSONObject current() {
        try {
            return rounds.getJSONObject(round);
        } catch (JSONException err) {
            throw new IllegalStateException("the replay holds " + rounds.length() + " rounds; round "
                    + (round + 1) + " was asked for");
        }
    }

    @Override
    public float trainStep(float[][] pairs, float[] labels) {
        try {
            JSONArray losses = current().getJSONArray("losses");
            if (step >= losses.length()) {
                throw new IllegalStateException("more training steps than the reference took (" + losses.length() + ")");
            }
            return (float) losses.getDouble(step++);
        } catch (JSONException err) {
            throw new IllegalStateException("malformed replay: " + err.getMessage());
        }
    }

    @Override
    public float[] score(float[][] pairs) {
        try {
            JSONObject r = current();
            JSONArray ref = r.getJSONArray("pairs"), prob = r.getJSONArray("prob");
            if (step != r.getJSONArray("losses").length()) {
                throw new IllegalStateException("the device took " + step + " steps, the reference "
                        + r.getJSONArray("losses").length());
            }
            if (pairs.length != ref.length()) {
                throw new IllegalStateException(pairs.length + " generated pairs, the reference had " + ref.length());
            }
            for (int i = 0; i < pairs.length; i++) {
                JSONArray row = ref.getJSONArray(i);
                for (int j = 0; j < pairs[i].length; j++) {
                    if (Math.abs(pairs[i][j] - row.getDouble(j)) > tolerance) {
                        throw new IllegalStateException("pair " + i + ", feature " + j + ": " + pairs[i][j]
                                + " here, " + row.getDouble(j) + " in the reference");
                    }
                }
            }
            float[] out = new float[prob.length()];
            for (int i = 0; i < out.length; i++) {
                out[i] = (float) prob.getDouble(i);
            }
            round++;
            return out;
        } catch (JSONException err) {
            throw new IllegalStateException("malformed replay: " + err.getMessage());
        }
    }

    @Override
    public void saveCheckpoint(File path) throws IOException {
        try (java.io.FileOutputStream out = new java.io.FileOutputStream(path)) {
            out.write((round + "\n").getBytes(StandardCharsets.US_ASCII));
        }
    }
}
