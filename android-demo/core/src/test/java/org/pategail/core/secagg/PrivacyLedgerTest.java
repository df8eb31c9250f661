package org.pategail.core.secagg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.FileOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.Vectors;

/**
 * The ledger composes as the Python device's does (dp-accounting's RDP and PLD accountants, the same ε), writes
 * and reads the Python SDK's file, and refuses requests and rounds exactly when the Python device refuses them,
 * with its lines (gaussian.json, "ledger").
 */
class PrivacyLedgerTest {
    @TempDir
    File tmp;

    static List<Accounting.Release> releases(JSONArray a) throws Exception {
        List<Accounting.Release> out = new ArrayList<>();
        for (int i = 0; i < a.length(); i++) {
            out.add(Accounting.Release.fromJson(a.getJSONObject(i)));
        }
        return out;
    }

    static java.util.Set<String> keys(JSONObject o) {
        java.util.Set<String> out = new java.util.TreeSet<>();
        for (java.util.Iterator<?> it = o.keys(); it.hasNext(); ) {
            out.add((String) it.next());
        }
        return out;
    }

    static JSONObject ledgerVectors() throws Exception {
        return Vectors.load("gaussian.json").getJSONObject("ledger");
    }

    static byte[] coordinator() throws Exception {
        return Vectors.hex(Vectors.load("gaussian.json"), "coordinator_public");
    }

    @Test
    void compositionsGiveThePythonSdksEpsilon() throws Exception {
        JSONArray cases = ledgerVectors().getJSONArray("compositions");
        assertEquals(10, cases.length());
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            List<Accounting.Release> releases = releases(c.getJSONArray("releases"));
            double got = Accounting.composedEpsilon(releases, c.getDouble("delta"), PrivacyLedger.LEDGER_INTERVAL);
            String name = c.getString("name") + " at δ " + c.getDouble("delta");
            assertEquals(c.getDouble("epsilon"), got, 1e-9 * got, name);             // the Python device's figure
            double rdp = Accounting.rdpEpsilon(releases, c.getDouble("delta"));
            assertEquals(c.getDouble("rdp_epsilon"), rdp, 1e-9 * rdp, name);
            if (!Accounting.anyGaussian(releases)) {                                 // PLD there: RDP bounds it
                assertTrue(rdp > got && rdp < 1.05 * got, name);
            }
        }
    }

    @Test
    void eachRoundIsTheReleaseThePythonLedgerRecords() throws Exception {
        JSONArray cases = ledgerVectors().getJSONArray("rounds");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            RoundConfig cfg = RoundConfig.fromSignedBytes(Vectors.hex(c, "config"), coordinator());
            Accounting.Release got = PrivacyLedger.roundRelease(cfg, c.getBoolean("environment"),
                    c.getDouble("env_l1_bound"));
            if (c.isNull("release")) {
                assertNull(got, c.getString("name"));
                continue;
            }
            JSONObject want = c.getJSONObject("release");
            JSONObject mine = got.toJson();
            assertEquals(keys(want), keys(mine), c.getString("name"));
            for (String k : keys(want)) {
                assertEquals(String.valueOf(want.get(k)), String.valueOf(mine.get(k)), c.getString("name") + "." + k);
            }
        }
    }

    @Test
    void requestsAndRoundsAreRefusedExactlyWhenThePythonDeviceRefusesThem() throws Exception {
        JSONObject v = ledgerVectors();
        PrivacyPlan plan = PrivacyPlan.fromManifest(v.getJSONObject("plan"));
        File file = new File(tmp, "privacy-ledger.json");
        JSONArray steps = v.getJSONArray("decisions");
        int refused = 0;
        for (int i = 0; i < steps.length(); i++) {
            JSONObject s = steps.getJSONObject(i);
            RoundConfig cfg = RoundConfig.fromSignedBytes(Vectors.hex(s, "config"), coordinator());
            boolean environment = s.getBoolean("environment");
            PrivacyLedger ledger = new PrivacyLedger(file, plan.targetEpsilon, plan.targetDelta);
            String name = "round " + s.getLong("round");
            assertEquals(s.isNull("request_refused") ? null : s.getString("request_refused"),
                    ledger.requestRefusal(plan, cfg.roundId, s.getInt("values"), environment), name);
            String got = null;
            try {
                ledger.check(cfg, environment, 10.0);
                ledger.record(cfg, environment, 10.0);
            } catch (SecAggException err) {
                assertEquals(SecAggException.Kind.PROTOCOL, err.kind());
                got = err.getMessage();
                refused++;
            }
            assertEquals(s.isNull("round_refused") ? null : s.getString("round_refused"), got, name);
            assertEquals(s.getDouble("epsilon_after"), ledger.epsilon(), 1e-9 * ledger.epsilon(), name);
        }
        assertTrue(refused > 0 && refused < steps.length());
        // the file is the Python SDK's: same format, same releases
        JSONObject mine = new JSONObject(new String(RoundLog.readAll(file), StandardCharsets.UTF_8));
        JSONObject python = new JSONObject(v.getString("ledger_file"));
        assertEquals(python.getString("format"), mine.getString("format"));
        assertEquals(python.getInt("unbounded"), mine.getInt("unbounded"));
        assertEquals(python.getJSONArray("releases").length(), mine.getJSONArray("releases").length());
        for (int i = 0; i < python.getJSONArray("releases").length(); i++) {
            JSONObject a = python.getJSONArray("releases").getJSONObject(i);
            JSONObject b = mine.getJSONArray("releases").getJSONObject(i);
            assertEquals(keys(a), keys(b));
            for (String k : keys(a)) {
                Object x = a.get(k), y = b.get(k);
                if (x instanceof Number) {
                    assertEquals(((Number) x).doubleValue(), ((Number) y).doubleValue(), 0.0, k);
                } else {
                    assertEquals(x, y, k);
                }
            }
        }
    }

    /**
     * A Laplace plan calibrated to its target (pld.json, "budget_run"): every planned round and the reserve are
     * accepted with the Python device's ε after each (PLD accountant), and the first round past them is refused, its
     * request too, at the same round and with the same lines; the file holds the Python device's releases.
     */
    @Test
    void aLaplacePlanRunsOutOfBudgetAtThePythonDevicesRound() throws Exception {
        JSONObject v = Vectors.load("pld.json").getJSONObject("budget_run");
        byte[] coordinator = Vectors.hex(Vectors.load("pld.json"), "coordinator_public");
        PrivacyPlan plan = PrivacyPlan.fromManifest(v.getJSONObject("plan"));
        double l1 = v.getDouble("env_l1_bound");
        File file = new File(tmp, "privacy-ledger.json");
        JSONArray steps = v.getJSONArray("decisions");
        String lastRefusal = null;
        long refusedAt = -1;
        for (int i = 0; i < steps.length(); i++) {
            JSONObject s = steps.getJSONObject(i);
            RoundConfig cfg = RoundConfig.fromSignedBytes(Vectors.hex(s, "config"), coordinator);
            boolean environment = s.getBoolean("environment");
            PrivacyLedger ledger = new PrivacyLedger(file, plan.targetEpsilon, plan.targetDelta);
            String name = "round " + s.getLong("round");
            assertEquals(s.isNull("request_refused") ? null : s.getString("request_refused"),
                    ledger.requestRefusal(plan, cfg.roundId, s.getInt("values"), environment), name);
            lastRefusal = null;
            try {
                ledger.check(cfg, environment, l1);
                ledger.record(cfg, environment, l1);
            } catch (SecAggException err) {
                lastRefusal = err.getMessage();
                refusedAt = cfg.roundId;
            }
            assertEquals(s.isNull("round_refused") ? null : s.getString("round_refused"), lastRefusal, name);
            double eps = ledger.epsilon();
            assertEquals(s.getDouble("epsilon_after"), eps, 1e-9 * eps, name);
        }
        assertEquals(steps.getJSONObject(steps.length() - 1).getLong("round"), refusedAt);
        double lastAccepted = steps.getJSONObject(steps.length() - 2).getDouble("epsilon_after");
        assertEquals(v.getDouble("expected_epsilon"), lastAccepted, 1e-12);    // what the plan promised, no more
        JSONArray python = v.getJSONObject("ledger_file").getJSONArray("releases");
        List<Accounting.Release> mine = PrivacyLedger.read(file).releases();
        assertEquals(python.length(), mine.size());
        for (int i = 0; i < python.length(); i++) {
            assertEquals(Accounting.Release.fromJson(python.getJSONObject(i)), mine.get(i));
        }
    }

    @Test
    void aLedgerThePythonSdkWroteIsReadAndComposed() throws Exception {
        JSONObject v = ledgerVectors();
        File file = new File(tmp, "privacy-ledger.json");
        try (FileOutputStream out = new FileOutputStream(file)) {
            out.write(v.getString("ledger_file").getBytes(StandardCharsets.UTF_8));
        }
        PrivacyLedger ledger = PrivacyLedger.read(file);
        assertEquals(2, ledger.releases().size());
        assertTrue(ledger.releases().get(0).gaussian);
        assertEquals(3, ledger.releases().get(0).shares);
        JSONArray steps = v.getJSONArray("decisions");
        double last = steps.getJSONObject(steps.length() - 1).getDouble("epsilon_after");
        assertEquals(last, ledger.epsilon(), 1e-9 * last);
        try (FileOutputStream out = new FileOutputStream(file)) {
            out.write("{\"format\": \"pategail-device-ledger/1\", \"releases\": [{\"count\": 1}]}".getBytes("UTF-8"));
        }
        SecAggException err = assertThrows(SecAggException.class, () -> PrivacyLedger.read(file));
        assertTrue(err.getMessage().contains("unreadable privacy ledger"), err.getMessage());
    }

    @Test
    void aNoiselessRoundIsInfiniteAndRefusedUnderABudget() throws Exception {
        JSONArray rounds = ledgerVectors().getJSONArray("rounds");
        RoundConfig noiseless = null;
        for (int i = 0; i < rounds.length(); i++) {
            if (rounds.getJSONObject(i).isNull("release")) {
                noiseless = RoundConfig.fromSignedBytes(Vectors.hex(rounds.getJSONObject(i), "config"), coordinator());
            }
        }
        RoundConfig cfg = noiseless;
        PrivacyLedger budgeted = new PrivacyLedger(null, 100.0, 1e-5);
        SecAggException err = assertThrows(SecAggException.class, () -> budgeted.check(cfg, false, 9.0));
        assertEquals("round 7 adds no noise to a sum: ε = ∞ for this device", err.getMessage());
        PrivacyLedger record = PrivacyLedger.inMemory();
        record.check(cfg, false, 9.0);
        record.record(cfg, false, 9.0);
        assertEquals(1, record.unbounded());
        assertEquals(Double.POSITIVE_INFINITY, record.epsilon());
    }
}
