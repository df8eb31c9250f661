package org.pategail.core.secagg;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.pategail.core.Vectors;

/** The Gaussian mechanism's configuration, upload and bounds, on the Python SDK's vectors (gaussian.json). */
class GaussianVectorsTest {
    @Test
    void signedGaussianConfigurationsReadAndReencodeAsThePythonSdkWritesThem() throws Exception {
        JSONObject v = Vectors.load("gaussian.json");
        byte[] coordinator = Vectors.hex(v, "coordinator_public");
        JSONArray accepted = v.getJSONObject("configs").getJSONArray("accepted");
        assertEquals(7, accepted.length());
        for (int i = 0; i < accepted.length(); i++) {
            JSONObject c = accepted.getJSONObject(i);
            String name = c.getString("name");
            RoundConfig cfg = RoundConfig.fromSignedBytes(Vectors.hex(c, "config"), coordinator);
            assertEquals(c.getString("mechanism"), cfg.mechanism, name);
            assertEquals(c.getInt("block"), cfg.block, name);
            assertEquals(c.getDouble("clip_norm"), cfg.clipNorm, 0.0, name);
            assertEquals(c.getInt("num_queries"), cfg.numQueries, name);
            assertEquals(c.getDouble("sum_noise_scale"), cfg.sumNoiseScale, 0.0, name);
            assertEquals(c.getInt("noise_divisor"), cfg.noiseDivisor(), name);
            assertArrayEquals(Vectors.hex(c, "body"), cfg.body(), name);       // the trailer, byte for byte
            assertArrayEquals(Vectors.hex(c, "digest"), cfg.digest(), name);
        }
        JSONArray rejected = v.getJSONObject("configs").getJSONArray("rejected");
        assertEquals(5, rejected.length());
        for (int i = 0; i < rejected.length(); i++) {
            JSONObject c = rejected.getJSONObject(i);
            SecAggException err = assertThrows(SecAggException.class,
                    () -> RoundConfig.fromSignedBytes(Vectors.hex(c, "config"), coordinator), c.getString("name"));
            assertEquals(SecAggException.Kind.MESSAGE_REJECTED, err.kind(), c.getString("name"));
        }
    }

    @Test
    void theUploadIsClippedBlockedAndEncodedAsThePythonDeviceDoesIt() throws Exception {
        JSONObject v = Vectors.load("gaussian.json");
        RoundConfig base = RoundConfig.fromSignedBytes(Vectors.hex(v.getJSONObject("configs").getJSONArray("accepted")
                .getJSONObject(1), "config"), Vectors.hex(v, "coordinator_public"));
        JSONArray cases = v.getJSONArray("inputs");
        assertEquals(8, cases.length());
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            RoundConfig cfg = new RoundConfig(base.roundId, base.participants, c.getInt("num_queries"), base.nMin,
                    base.threshold, base.degree, base.sumNoiseScale, 0.0, base.roundSeed, base.envelopePublic,
                    base.colluders, base.aggregator, base.fracBits, base.checksumCommitment, "gaussian",
                    c.getInt("block"), c.getDouble("clip_norm"));
            double[] values = Vectors.doubles(c.getJSONArray("values"));
            String name = "case " + i + " (block " + cfg.block + ", C " + cfg.clipNorm + ")";
            assertEquals(c.getInt("input_length"), UploadInput.inputLength(cfg, values.length), name);
            double[] released = UploadInput.gaussianInput(values, cfg);
            assertArrayEquals(Vectors.doubles(c.getJSONArray("released")), released, 1e-12, name);
            assertArrayEquals(Vectors.longs(c.getJSONArray("quanta")), FixedPoint.encodeSigned(released), name);
            double norm = 0;
            for (double x : released) {
                norm += x * x;
            }
            assertEquals(true, Math.sqrt(norm) <= cfg.clipNorm * (1 + 1e-12), name);
        }
    }

    @Test
    void gaussianNoiseBoundsAreThePythonSdks() throws Exception {
        JSONArray cases = Vectors.load("gaussian.json").getJSONArray("noise_bounds");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            double want = c.getDouble("bound");
            assertEquals(want, FixedPoint.mechanismNoiseBound("gaussian", c.getInt("n"), c.getDouble("std_quanta"),
                    c.getInt("divisor"), 64.0), 1e-12 * want);
        }
    }

    @Test
    void aLaplaceEnvironmentUploadIsClippedToItsL1Bound() {
        double[] honest = {0.5, 0.25, 0.0, 1.0};
        assertArrayEquals(honest, UploadInput.laplaceEnvironmentInput(honest, 9.0), 0.0);
        double[] forged = new double[30];
        java.util.Arrays.fill(forged, 0.6);             // L1 18: twice the bound
        forged[0] = 7.0;                                // clipped to 1 first: L1 18.4
        double[] out = UploadInput.laplaceEnvironmentInput(forged, 9.0);
        double norm = 0;
        for (double x : out) {
            norm += x;
        }
        assertEquals(9.0, norm, 1e-12);
        assertEquals(1.0 * 9.0 / 18.4, out[0], 1e-12);
        assertEquals(0.6 * 9.0 / 18.4, out[1], 1e-12);
    }
}
