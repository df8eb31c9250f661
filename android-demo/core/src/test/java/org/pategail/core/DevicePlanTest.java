package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.Random;

import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.tools.MlpTrainer;

/**
 * The privacy plan in force, as the Python device keeps it: a bundle's declared plan is remembered in
 * privacy-plan.json (keys sorted, as Python writes it) and stays in force under a later bundle that declares
 * none, until the owner forgets it; a remembered plan that cannot be read refuses every request ("budget")
 * and leaves the device as it was; a malformed plan in a bundle is refused at installation, in one line. Under a
 * Gaussian plan the device answers the environment request with its region sums, and refuses a request its
 * ledger (the Python SDK's file) cannot afford with the Python device's line.
 */
class DevicePlanTest {
    @TempDir
    File tmp;

    private File bundleWithPlan(JSONObject plan) throws Exception {
        File d = new File(tmp, "bundle-" + System.nanoTime());
        assertTrue(d.mkdirs());
        for (File f : new File(Vectors.dir(), "bundle").listFiles()) {
            byte[] data = Bundle.readAll(f);
            if (f.getName().equals(Bundle.MANIFEST)) {
                JSONObject m = new JSONObject(new String(data, StandardCharsets.UTF_8)).put("privacy", plan);
                data = m.toString().getBytes(StandardCharsets.UTF_8);
            }
            BundleTest.write(new File(d, f.getName()), data);
        }
        return d;
    }

    @Test
    void aDeclaredPlanIsRememberedUntilTheOwnerForgetsIt() throws Exception {
        JSONObject plan = Vectors.load("policy.json").getJSONObject("plans").getJSONObject("laplace");
        File root = new File(tmp, "device");
        Device d = new Device(root, 4, new Random(1), DeviceMessages.Limits.DEFAULT, new MlpTrainer(), null,
                new SecureRandom());
        assertNull(d.planInForce());
        d.installBundle(bundleWithPlan(plan), null);
        assertEquals(8.0, d.planInForce().getDouble("target_epsilon"), 0.0);     // remembered at its first use
        File remembered = new File(root, Device.PLAN_FILE);
        String text = new String(Bundle.readAll(remembered), StandardCharsets.UTF_8);
        assertTrue(text.startsWith("{\"colluders\": 1, \"env_noise_multiplier\": 0.4, \"min_survivors\": 0.6, "), text);
        assertEquals(plan.toString(), new JSONObject(text).toString());
        // a bundle without a privacy section does not lift the floors
        d.installBundle(new File(Vectors.dir(), "bundle"), null);
        assertEquals(0.6, d.planInForce().getDouble("min_survivors"), 0.0);
        // restarted, the device still holds itself to it
        Device again = new Device(root, 4, new Random(1), DeviceMessages.Limits.DEFAULT, new MlpTrainer(), null,
                new SecureRandom());
        assertEquals(2.0, again.planInForce().getDouble("sum_noise_scale"), 0.0);
        assertTrue(again.forgetPrivacyPlan());
        assertNull(again.planInForce());
        assertFalse(again.forgetPrivacyPlan());
    }

    @Test
    void anUnreadableRememberedPlanRefusesEveryRequest() throws Exception {
        File root = new File(tmp, "device");
        Device d = new Device(root, 4, new Random(1), DeviceMessages.Limits.DEFAULT, new MlpTrainer(), null,
                new SecureRandom());
        d.installBundle(new File(Vectors.dir(), "bundle"), null);
        d.addDays(Vectors.intRows(Vectors.load("features.json").getJSONArray("days")));
        BundleTest.write(new File(root, Device.PLAN_FILE), "{\"target_epsilon\": ".getBytes(StandardCharsets.UTF_8));
        MessageError err = assertThrows(MessageError.class, d::planInForce);
        assertEquals(DeviceMessages.BUDGET, err.code);
        byte[] request = Vectors.hex(Vectors.load("messages.json").getJSONObject("device"), "round_request");
        DeviceMessages.Message reply = DeviceMessages.fromBytes(d.handle(request), DeviceMessages.Limits.DEFAULT, 0);
        assertTrue(reply instanceof DeviceMessages.ErrorReply);
        assertEquals(DeviceMessages.BUDGET, ((DeviceMessages.ErrorReply) reply).code);
        String message = ((DeviceMessages.ErrorReply) reply).message;
        assertTrue(message.contains("privacy-plan.json: the remembered privacy plan cannot be read"), message);
        assertNull(d.pending());
    }

    @Test
    void aMalformedPlanInABundleIsRefusedInOneLineAGaussianOneInstalled() throws Exception {
        JSONObject plan = Vectors.load("policy.json").getJSONObject("plans").getJSONObject("laplace");
        plan.put("sum_noise_scale", 0.0);
        BundleException err = assertThrows(BundleException.class, () -> Bundle.load(bundleWithPlan(plan), null));
        assertTrue(err.getMessage().contains("manifest.json: malformed privacy plan (need target_epsilon > 0"),
                err.getMessage());
        JSONObject gaussian = Vectors.load("policy.json").getJSONObject("plans").getJSONObject("gaussian");
        Bundle b = Bundle.load(bundleWithPlan(gaussian), null);
        assertEquals("gaussian", org.pategail.core.secagg.PrivacyPlan.fromManifest(
                b.manifest.getJSONObject("privacy")).mechanism);
        gaussian.remove("noise_multiplier");            // a Gaussian plan without its reward multiplier
        err = assertThrows(BundleException.class, () -> Bundle.load(bundleWithPlan(gaussian), null));
        assertTrue(err.getMessage().contains("malformed privacy plan"), err.getMessage());
    }

    @Test
    void underAGaussianPlanTheLedgerRefusesWhatThePythonDeviceRefuses() throws Exception {
        JSONObject ledger = Vectors.load("gaussian.json").getJSONObject("ledger");
        File root = new File(tmp, "device");
        Device d = new Device(root, 4, new Random(1), DeviceMessages.Limits.DEFAULT, new MlpTrainer(), null,
                new SecureRandom());
        d.installBundle(bundleWithPlan(ledger.getJSONObject("plan")), null);
        d.addDays(Vectors.intRows(Vectors.load("features.json").getJSONArray("days")));
        // the environment request with region sums: the vector of gaussian.json's regions, pending unclipped
        byte[] initial = DeviceMessages.toBytes(new DeviceMessages.InitialStatesRequest(9, 16));
        DeviceMessages.Message ack = DeviceMessages.fromBytes(d.handle(initial), DeviceMessages.Limits.DEFAULT, 0);
        int length = Vectors.load("gaussian.json").getJSONObject("regions").getJSONArray("environment_vector").length();
        assertEquals(length, ((DeviceMessages.Ack) ack).n);
        assertEquals(length, d.pending().length);
        // the Python device's ledger after an environment round and one reward round: round 3 is past the budget
        BundleTest.write(new File(root, Device.LEDGER_FILE), ledger.getString("ledger_file")
                .getBytes(StandardCharsets.UTF_8));
        byte[] request = Vectors.hex(Vectors.load("messages.json").getJSONObject("device"), "round_request");
        DeviceMessages.Message reply = DeviceMessages.fromBytes(d.handle(request), DeviceMessages.Limits.DEFAULT, 0);
        assertTrue(reply instanceof DeviceMessages.ErrorReply, reply.toString());
        assertEquals(DeviceMessages.BUDGET, ((DeviceMessages.ErrorReply) reply).code);
        String python = ledger.getJSONArray("decisions").getJSONObject(2).getString("request_refused");
        assertTrue(python.startsWith("round 3: "), python);
        assertEquals(python, ((DeviceMessages.ErrorReply) reply).message);
        assertEquals(length, d.pending().length, "the refusal left the pending vector as it was");
        assertEquals(2, d.ledger().releases().size());
    }
}
