package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.FileOutputStream;

import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.secagg.RoundConfig;

/**
 * The ledger records the signed parameters of each upload, survives a restart, refuses a damaged file, and
 * counts an environment upload as one Laplace vector query of L1 sensitivity 2·9 + M quanta.
 */
class PrivacyLedgerTest {
    @TempDir
    File tmp;

    /** A ledger file with one upload per flag (environment or not), all under the vectors' signed round 12. */
    File ledgerOf(boolean... environment) throws Exception {
        JSONObject v = Vectors.load("messages.json");
        RoundConfig cfg = RoundConfig.fromSignedBytes(Vectors.hex(v.getJSONObject("round_config"), "frame"),
                Vectors.hex(v, "coordinator_public"));
        File f = new File(tmp, "ledger.jsonl");
        PrivacyLedger ledger = new PrivacyLedger(f);
        for (int i = 0; i < environment.length; i++) {
            ledger.record(cfg, environment[i], Contributions.ENV_L1_BOUND, 1_800_000_000L + 100L * i);
        }
        return f;
    }

    @Test
    void recordsReloadsAndTotals() throws Exception {
        File f = ledgerOf(false, false);
        PrivacyLedger again = new PrivacyLedger(f);
        assertEquals(2, again.entries().size());
        PrivacyLedger.Entry e = again.entries().get(1);
        assertEquals(12, e.round);
        assertEquals(94, e.queries);
        assertEquals(2, e.nMin);
        assertEquals(4.0, e.epsilonSum(), 1e-12);       // b = 0.25 on a sum of scores in [0, 1]
        assertEquals(2.0, e.epsilonSqSum(), 1e-12);
        assertFalse(e.environment);
        assertEquals(94 * 6.0, e.epsilon(), 1e-9);      // 94 queries, each 1/b + 1/b_sq (basic composition)
        assertEquals(2 * 94 * 6.0, again.totalEpsilon(), 1e-9);
        try (FileOutputStream out = new FileOutputStream(f, true)) {
            out.write("{\"round\": 13}\n".getBytes("UTF-8"));
        }
        java.io.IOException err = assertThrows(java.io.IOException.class, () -> new PrivacyLedger(f));
        assertTrue(err.getMessage().contains("line 3"), err.getMessage());
    }

    @Test
    void anEnvironmentUploadIsOneVectorQuery() throws Exception {
        // the environment (94 values, b = 0.25, b_sq = 0.5), then a reward round under the same scales
        File f = ledgerOf(true, false);
        PrivacyLedger again = new PrivacyLedger(f);
        PrivacyLedger.Entry env = again.entries().get(0);
        assertTrue(env.environment);
        assertFalse(again.entries().get(1).environment);
        double delta1 = 18.0 + 94.0 / (1 << 24);        // 2 * ENV_L1_BOUND + M quanta
        assertEquals(delta1, PrivacyLedger.environmentSensitivity(94, Contributions.ENV_L1_BOUND), 0.0);
        assertEquals(delta1 / 0.25, env.epsilon(), 1e-9);  // at the smaller of the two scales, counted once
        assertEquals(delta1 / 0.25 + 94 * 6.0, again.totalEpsilon(), 1e-9);
        // only environment lines carry the key (older ledgers read as reward uploads)
        String[] lines = new String(Bundle.readAll(f), "UTF-8").split("\n");
        assertTrue(new JSONObject(lines[0]).getBoolean("environment"));
        assertFalse(new JSONObject(lines[1]).has("environment"));
    }

    @Test
    void theEnvironmentInputIsClippedToTheL1Bound() {
        double[] honest = {0.5, 0.25, 0.0, 1.0};
        org.junit.jupiter.api.Assertions.assertArrayEquals(honest,
                Contributions.environmentInput(honest, Contributions.ENV_L1_BOUND), 0.0);
        double[] forged = new double[30];
        java.util.Arrays.fill(forged, 0.6);             // L1 18: twice the bound
        forged[0] = 7.0;                                // clipped to 1 first: L1 18.4
        double[] out = Contributions.environmentInput(forged, Contributions.ENV_L1_BOUND);
        double norm = 0;
        for (double x : out) {
            norm += x;
        }
        assertEquals(Contributions.ENV_L1_BOUND, norm, 1e-12);
        assertEquals(1.0 * 9.0 / 18.4, out[0], 1e-12);
        assertEquals(0.6 * 9.0 / 18.4, out[1], 1e-12);
    }
}
