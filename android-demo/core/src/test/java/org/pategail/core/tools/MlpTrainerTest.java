package org.pategail.core.tools;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;

import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.Bundle;
import org.pategail.core.Vectors;

/** The JVM's discriminator trainer against ONNX Runtime's: the vectors' 20 AdamW steps (losses) and the
 * scores after them, from the bundle's initial parameters; and its checkpoint round trip. */
class MlpTrainerTest {
    private static float[][] rows(JSONArray flat, int width, int[] which) throws Exception {
        float[][] out = new float[which.length][width];
        for (int i = 0; i < which.length; i++) {
            for (int j = 0; j < width; j++) {
                out[i][j] = (float) flat.getDouble(which[i] * width + j);
            }
        }
        return out;
    }

    private static float[] labels(JSONArray all, int[] which) throws Exception {
        float[] out = new float[which.length];
        for (int i = 0; i < which.length; i++) {
            out[i] = (float) all.getDouble(which[i]);
        }
        return out;
    }

    @Test
    void twentyStepsGiveOnnxRuntimesLossesAndScores(@TempDir File tmp) throws Exception {
        JSONObject t = Vectors.load("training.json");
        Bundle bundle = Bundle.load(new File(Vectors.dir(), "bundle"), null);
        MlpTrainer trainer = new MlpTrainer();
        trainer.open(bundle, null);
        JSONArray pairs = t.getJSONArray("pairs"), labels = t.getJSONArray("labels");
        JSONArray batches = t.getJSONArray("batches");
        JSONArray losses = t.getJSONArray("losses");
        File half = new File(tmp, "half.ckpt");
        for (int s = 0; s < batches.length(); s++) {
            int[] rows = Vectors.ints(batches.getJSONArray(s));
            float loss = trainer.trainStep(rows(pairs, 15, rows), labels(labels, rows));
            assertEquals(losses.getDouble(s), loss, 1e-5, "loss of step " + s);
            if (s == 9) {
                trainer.saveCheckpoint(half);
            }
        }
        int[] evalRows = Vectors.ints(t.getJSONArray("eval_rows"));
        float[] prob = trainer.score(rows(pairs, 15, evalRows));
        JSONArray ref = t.getJSONArray("eval_prob");
        for (int i = 0; i < prob.length; i++) {
            assertEquals(ref.getDouble(i), prob[i], 1e-5, "score " + i);
        }
        // resumed from the checkpoint after step 10, the last ten steps give the same scores
        MlpTrainer resumed = new MlpTrainer();
        resumed.open(bundle, half);
        for (int s = 10; s < batches.length(); s++) {
            int[] rows = Vectors.ints(batches.getJSONArray(s));
            resumed.trainStep(rows(pairs, 15, rows), labels(labels, rows));
        }
        assertArrayEquals(prob, resumed.score(rows(pairs, 15, evalRows)));
    }

    @Test
    void aBundleDeclaringAnotherModelOrABadCheckpointIsRefused(@TempDir File tmp) throws Exception {
        Bundle bundle = Bundle.load(new File(Vectors.dir(), "bundle"), null);
        File bad = new File(tmp, "bad.ckpt");
        Files.write(bad.toPath(), "PGMLP1 too short".getBytes("US-ASCII"));
        IOException err = assertThrows(IOException.class, () -> new MlpTrainer().open(bundle, bad));
        assertTrue(err.getMessage().contains("truncated"), err.getMessage());
        bundle.manifest.getJSONObject("discriminator").put("loss", "mse");
        err = assertThrows(IOException.class, () -> new MlpTrainer().open(bundle, null));
        assertTrue(err.getMessage().contains("declares loss 'mse'"), err.getMessage());
    }
}
