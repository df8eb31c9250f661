package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.File;
import java.security.SecureRandom;
import java.util.Random;

import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.SecAggException;
import org.pategail.core.tools.ReplayTrainer;

/**
 * The Java device answers the Python reference's RoundRequest with the Python device's Ack bytes and its
 * scores as the pending vector (its trainer replays the reference's ONNX Runtime run and checks the
 * generated pairs' features against it), refuses what the Python device refuses, and survives a restart.
 */
class DeviceTest {
    @TempDir
    File tmp;
    static JSONObject ref;
    static JSONObject msgs;
    static int[][] days;

    @BeforeAll
    static void load() throws Exception {
        ref = Vectors.load("device.json");
        msgs = Vectors.load("messages.json").getJSONObject("device");
        days = Vectors.intRows(Vectors.load("features.json").getJSONArray("days"));
    }

    Device device(String name) throws Exception {
        return new Device(new File(tmp, name), 1, new Random(ref.getLong("seed")), DeviceMessages.Limits.DEFAULT,
                new ReplayTrainer(new File(Vectors.dir(), "device.json"), 1e-6), null, new SecureRandom());
    }

    static DeviceMessages.Message reply(byte[] bytes) throws MessageError {
        return DeviceMessages.fromBytes(bytes, DeviceMessages.Limits.DEFAULT, 0);
    }

    @Test
    void aRoundRequestIsAnsweredLikeThePythonDevice() throws Exception {
        Device d = device("a");
        d.installBundle(new File(Vectors.dir(), "bundle"), null);
        d.addDays(days);
        byte[] request = Vectors.hex(msgs, "round_request");
        byte[] ack = d.handle(request);
        assertEquals(ref.getString("ack"), Bytes.hex(ack));
        JSONArray prob = ref.getJSONArray("rounds").getJSONObject(0).getJSONArray("prob");
        double[] pending = d.pending();
        assertEquals(prob.length(), pending.length);
        for (int i = 0; i < pending.length; i++) {
            assertEquals(Math.min(1, Math.max(0, prob.getDouble(i))), pending[i], 0.0);
        }
        // the coordinator restarted and sends the same round again: replayed from the checkpoint before it
        assertEquals(ref.getString("ack"), Bytes.hex(d.handle(request)));
        assertArrayEquals(pending, d.pending());
    }

    @Test
    void refusalsLeaveTheStateUnchanged() throws Exception {
        Device d = device("b");
        byte[] request = Vectors.hex(msgs, "round_request");
        DeviceMessages.ErrorReply e = (DeviceMessages.ErrorReply) reply(d.handle(request));
        assertEquals(DeviceMessages.NOT_READY, e.code);
        assertEquals(3, e.round);
        d.installBundle(new File(Vectors.dir(), "bundle"), null);
        assertEquals(DeviceMessages.NOT_READY, ((DeviceMessages.ErrorReply) reply(d.handle(request))).code);
        d.addDays(days);
        JSONObject refused = Vectors.load("messages.json").getJSONObject("device_refused");
        byte[] outOfRange = Vectors.hex(refused.getJSONObject("cell_out_of_range"), "frame");
        assertEquals(DeviceMessages.CELL_RANGE, ((DeviceMessages.ErrorReply) reply(d.handle(outOfRange))).code);
        assertNull(d.pending());
        byte[] garbage = {1, 2, 3};
        e = (DeviceMessages.ErrorReply) reply(d.handle(garbage));
        assertEquals(DeviceMessages.MALFORMED, e.code);
        assertEquals(DeviceMessages.NO_ROUND, e.round);
        // a policy whose hash is not the announced one; then a right hash on a device without a policy runtime
        DeviceMessages.PolicyUpdate good = (DeviceMessages.PolicyUpdate) reply(Vectors.hex(msgs, "policy_update"));
        DeviceMessages.PolicyUpdate bad = new DeviceMessages.PolicyUpdate(good.round, good.policySha256,
                Bytes.concat(good.policyOnnx, new byte[]{0}));
        assertEquals(DeviceMessages.HASH, ((DeviceMessages.ErrorReply) reply(d.handle(DeviceMessages.toBytes(bad)))).code);
        assertEquals(DeviceMessages.INCOMPATIBLE, ((DeviceMessages.ErrorReply) reply(d.handle(DeviceMessages.toBytes(good)))).code);
        SecAggException s = assertThrows(SecAggException.class, () -> d.maskedInput(new byte[0]));
        assertEquals(SecAggException.Kind.PROTOCOL, s.kind());
        assertThrows(IllegalArgumentException.class, () -> d.addDays(new int[][]{new int[47]}));
    }

    @Test
    void initialStatesRequestPendsThePythonContribution() throws Exception {
        Device d = device("c");
        d.installBundle(new File(Vectors.dir(), "bundle"), null);
        d.addDays(days);
        DeviceMessages.Ack ack = (DeviceMessages.Ack) reply(d.handle(Vectors.hex(msgs, "initial_states_request")));
        assertEquals("initial_states_request", ack.kind);
        JSONObject f = Vectors.load("features.json");
        int nCells = 4210;
        double[] explore = Vectors.doubles(f.getJSONArray("explore_law_contribution"));
        double[] places = Vectors.doubles(f.getJSONArray("place_contribution"));
        assertEquals(nCells + 3, places.length);
        int placeStart = 2 * nCells + 2 + explore.length;
        assertEquals(placeStart + places.length, ack.n);
        double[] pending = d.pending();
        for (int b = 0; b < explore.length; b++) {
            assertEquals(explore[b], pending[2 * nCells + 2 + b], 1e-9);
        }
        for (int i = 0; i < places.length; i++) {
            assertEquals(places[i], pending[placeStart + i], 1e-12);
        }
        assertEquals(Math.min(1.0, days.length / 100.0), pending[2 * nCells + 1], 0.0);
    }

    @Test
    void aRestartKeepsIdentityBundleAndDays() throws Exception {
        Device d = device("d");
        d.installBundle(new File(Vectors.dir(), "bundle"), null);
        d.addDays(days);
        Device again = device("d");
        assertArrayEquals(d.identity().signingPublic, again.identity().signingPublic);
        assertEquals(d.bundle().sha256, again.bundle().sha256);
        assertEquals(days.length, again.nDays());
        assertEquals(ref.getString("ack"), Bytes.hex(again.handle(Vectors.hex(msgs, "round_request"))));
        BundleException e = assertThrows(BundleException.class,
                () -> again.installBundle(new File(Vectors.dir(), "bundle"), "0".repeat(64)));
        assertEquals(true, e.getMessage().contains("differs from the expected"));
    }
}
