package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The committed bundle verifies; altered, truncated, missing or foreign bundles are refused in one line. */
class BundleTest {
    @TempDir
    File tmp;

    static File source() {
        return new File(Vectors.dir(), "bundle");
    }

    File copy() throws IOException {
        File d = new File(tmp, "bundle-" + System.nanoTime());
        assertTrue(d.mkdirs());
        for (File f : source().listFiles()) {
            write(new File(d, f.getName()), Bundle.readAll(f));
        }
        return d;
    }

    static void write(File f, byte[] data) throws IOException {
        try (FileOutputStream out = new FileOutputStream(f)) {
            out.write(data);
        }
    }

    @Test
    void theCommittedBundleVerifies() throws Exception {
        Bundle b = Bundle.load(source(), "1.19.2");
        assertEquals(Bundle.sha256File(new File(source(), Bundle.MANIFEST)), b.sha256);
        assertEquals(4210, b.cells.length);
        assertEquals(5249, b.nParameters);
        assertEquals(0.001, b.learningRate, 1e-15);
        assertEquals(1.0f, b.expertLabel);
        assertNull(b.policyTraining);           // a PateGail bundle: no DP-FedAvg artifacts
    }

    static String refusal(File dir, String runtime) {
        BundleException e = assertThrows(BundleException.class, () -> Bundle.load(dir, runtime));
        assertTrue(!e.getMessage().contains("\n"), "one line: " + e.getMessage());
        return e.getMessage();
    }

    @Test
    void aFlippedByteIsRefused() throws Exception {
        File d = copy();
        File f = new File(d, "discriminator_training_model.onnx");
        byte[] raw = Bundle.readAll(f);
        raw[raw.length / 2] ^= 1;
        write(f, raw);
        assertTrue(refusal(d, "1.19.2").contains("SHA-256 does not match"));
    }

    @Test
    void aTruncatedOrMissingFileIsRefused() throws Exception {
        File d = copy();
        File f = new File(d, "policy.onnx");
        byte[] raw = Bundle.readAll(f);
        write(f, java.util.Arrays.copyOf(raw, raw.length - 1));
        assertTrue(refusal(d, "1.19.2").contains("SHA-256 does not match"));
        File e = copy();
        assertTrue(new File(e, "cells.csv").delete());
        assertTrue(refusal(e, "1.19.2").contains("cells.csv is missing"));
    }

    @Test
    void anEditedManifestIsRefused() throws Exception {
        File d = copy();
        File m = new File(d, Bundle.MANIFEST);
        String text = new String(Bundle.readAll(m), StandardCharsets.UTF_8);
        write(m, text.replace("\"format_version\": 1", "\"format_version\": 2").getBytes(StandardCharsets.UTF_8));
        assertTrue(refusal(d, "1.19.2").contains("format version"));
        write(m, text.replace("\"cells.csv\": {", "\"../cells.csv\": {").getBytes(StandardCharsets.UTF_8));
        assertTrue(refusal(d, "1.19.2").contains("not a plain name"));
        write(m, text.replace("\"cells\": \"cells.csv\",", "\"cells\": \"cells.csv\", \"initial_states\": \"states.csv\",")
                .getBytes(StandardCharsets.UTF_8));
        assertTrue(refusal(d, "1.19.2").contains("states.csv is used but has no hash"));
        write(m, text.replace("\"cells\": \"cells.csv\",", "\"cells\": \"cells.csv\", \"action_rates\": 1,")
                .getBytes(StandardCharsets.UTF_8));
        assertTrue(refusal(d, "1.19.2").contains("environment.action_rates must be true or false"));
        write(m, text.replace("\"cells\": \"cells.csv\",", "\"cells\": \"cells.csv\", \"action_rates\": true,")
                .getBytes(StandardCharsets.UTF_8));
        assertTrue(Bundle.load(d, "1.19.2").actionRates);    // the environment vector then ends with the part
        write(m, text.replace("\"cells\": \"cells.csv\",", "\"cells\": \"cells.csv\", \"action_rates\": false,")
                .getBytes(StandardCharsets.UTF_8));
        assertFalse(Bundle.load(d, "1.19.2").actionRates);
        assertEquals(Contributions.DAYS_CAP, Bundle.load(d, "1.19.2").initialStatesDaysCap);      // absent
        for (String bad : new String[]{"0", "2.5", "true", "\"100\""}) {
            write(m, text.replace("\"cells\": \"cells.csv\",",
                    "\"cells\": \"cells.csv\", \"initial_states_days_cap\": " + bad + ",").getBytes(StandardCharsets.UTF_8));
            assertTrue(refusal(d, "1.19.2").contains("environment.initial_states_days_cap must be a whole number"), bad);
        }
        write(m, text.replace("\"cells\": \"cells.csv\",", "\"cells\": \"cells.csv\", \"initial_states_days_cap\": 1000,")
                .getBytes(StandardCharsets.UTF_8));
        assertEquals(1000, Bundle.load(d, "1.19.2").initialStatesDaysCap);
        for (String key : new String[]{"replay", "input_scaling"}) {
            write(m, text.replace("\"loss\":", "\"" + key + "\": \"owner\", \"loss\":")
                    .getBytes(StandardCharsets.UTF_8));
            assertTrue(refusal(d, "1.19.2").contains("discriminator." + key + ": this core trains without it"), key);
        }
        write(m, "{not json".getBytes(StandardCharsets.UTF_8));
        assertTrue(refusal(d, "1.19.2").contains("not valid JSON"));
        assertTrue(refusal(new File(tmp, "nowhere"), "1.19.2").contains("not a model bundle"));
    }

    @Test
    void aRuntimeOutsideTheRangeIsRefused() {
        assertTrue(refusal(source(), "1.20.0").contains("onnxruntime 1.20.0"));
        assertTrue(refusal(source(), "1.18.1").contains("onnxruntime 1.18.1"));
        Bundle.parseVersion("1.19.2+cpu");
    }
}
