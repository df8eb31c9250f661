package org.pategail.core.secagg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.pategail.core.Vectors;

/** The device's floors decide every signed configuration of the shared vectors as the Python device does:
 * accepted, or refused with the Python refusal's line, word for word. */
class DevicePolicyTest {
    @Test
    void everyConfigurationIsDecidedAsThePythonDeviceDecidesIt() throws Exception {
        JSONObject v = Vectors.load("policy.json");
        byte[] coordinator = Vectors.hex(v, "coordinator_public");
        JSONArray cases = v.getJSONArray("cases");
        assertEquals(31, cases.length());
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            DevicePolicy policy = c.isNull("plan") ? DevicePolicy.NONE
                    : DevicePolicy.fromPlan(v.getJSONObject("plans").getJSONObject(c.getString("plan")));
            RoundConfig cfg = RoundConfig.fromSignedBytes(Vectors.hex(c, "config"), coordinator);
            String got = null;
            try {
                policy.check(cfg, c.getBoolean("environment"), c.getDouble("env_l1_bound"), c.getBoolean("cells"));
            } catch (SecAggException err) {
                assertEquals(SecAggException.Kind.PROTOCOL, err.kind(), c.getString("name"));
                got = err.getMessage();
            }
            assertEquals(c.isNull("refused") ? null : c.getString("refused"), got, c.getString("name"));
        }
    }

    @Test
    void thePlansThePythonSdkTakesAreTakenTheOthersRefused() throws Exception {
        JSONArray cases = Vectors.load("policy.json").getJSONArray("plan_validity");
        assertEquals(8, cases.length());
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            boolean valid;
            try {
                PrivacyPlan plan = PrivacyPlan.fromManifest(c.getJSONObject("plan"));
                assertEquals(c.getJSONObject("plan").optDouble("cells_noise_multiplier", 0.0),
                        plan.cellsNoiseMultiplier, 0.0, c.getString("name"));
                assertEquals(plan.cellsNoiseMultiplier, plan.policy().minCellsNoiseMultiplier, 0.0);
                valid = true;
            } catch (IllegalArgumentException err) {
                valid = false;
            }
            assertEquals(c.getBoolean("valid"), valid, c.getString("name"));
        }
        // the cell-table request costs one Gaussian release at the plan's cell multiplier; a plan without one
        // has no such release to offer
        PrivacyPlan cellsOnly = PrivacyPlan.fromManifest(Vectors.load("policy.json").getJSONObject("plans")
                .getJSONObject("cells_only"));
        assertEquals(Accounting.Release.gaussian(1.2, 1.0, 1, 1), cellsOnly.requestRelease(4210, false, true));
        assertThrows(IllegalArgumentException.class, () -> cellsOnly.requestRelease(94, false, false));
        assertThrows(IllegalArgumentException.class, () -> cellsOnly.requestRelease(94, true, false));
        PrivacyPlan run = PrivacyPlan.fromManifest(Vectors.load("policy.json").getJSONObject("plans")
                .getJSONObject("gaussian"));
        assertThrows(IllegalArgumentException.class, () -> run.requestRelease(4210, false, true));
    }

    @Test
    void aMalformedPlanIsNamed() throws Exception {
        JSONObject plan = Vectors.load("policy.json").getJSONObject("plans").getJSONObject("laplace");
        plan.put("min_survivors", 1.5);
        IllegalArgumentException err = assertThrows(IllegalArgumentException.class, () -> DevicePolicy.fromPlan(plan));
        assertEquals(true, err.getMessage().contains("min_survivors in (0, 1]"));
    }

    @Test
    void numbersAreWrittenAsPythonsSixSignificantDigits() {
        assertEquals("0.388872", DevicePolicy.g6(7.0 / 18.000774860382080078125));
        assertEquals("2", DevicePolicy.g6(2.0));
        assertEquals("1.9", DevicePolicy.g6(1.9));
        assertEquals("1e-05", DevicePolicy.g6(1e-5));
        assertEquals("0.0001", DevicePolicy.g6(1e-4));
        assertEquals("123457", DevicePolicy.g6(123456.7));
        assertEquals("1.23457e+06", DevicePolicy.g6(1234567.0));
        assertEquals("0", DevicePolicy.g6(0.0));
    }
}
