package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.FileOutputStream;

import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.secagg.RoundConfig;

/** The ledger records the signed parameters of each upload, survives a restart, and refuses a damaged file. */
class PrivacyLedgerTest {
    @TempDir
    File tmp;

    @Test
    void recordsReloadsAndTotals() throws Exception {
        JSONObject v = Vectors.load("messages.json");
        RoundConfig cfg = RoundConfig.fromSignedBytes(Vectors.hex(v.getJSONObject("round_config"), "frame"),
                Vectors.hex(v, "coordinator_public"));
        File f = new File(tmp, "ledger.jsonl");
        PrivacyLedger ledger = new PrivacyLedger(f);
        ledger.record(cfg, 1_800_000_000L);
        ledger.record(cfg, 1_800_000_100L);
        PrivacyLedger again = new PrivacyLedger(f);
        assertEquals(2, again.entries().size());
        PrivacyLedger.Entry e = again.entries().get(1);
        assertEquals(12, e.round);
        assertEquals(94, e.queries);
        assertEquals(2, e.nMin);
        assertEquals(4.0, e.epsilonSum(), 1e-12);       // b = 0.25 on a sum of scores in [0, 1]
        assertEquals(2.0, e.epsilonSqSum(), 1e-12);
        assertEquals(12.0, again.totalEpsilon(), 1e-12);
        try (FileOutputStream out = new FileOutputStream(f, true)) {
            out.write("{\"round\": 13}\n".getBytes("UTF-8"));
        }
        java.io.IOException err = assertThrows(java.io.IOException.class, () -> new PrivacyLedger(f));
        assertTrue(err.getMessage().contains("line 3"), err.getMessage());
    }
}
