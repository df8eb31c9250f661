package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;

import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.Crypto;
import org.pategail.core.secagg.KeyDirectory;
import org.pategail.core.secagg.Wire;
import org.pategail.core.tools.ReplayTrainer;

/** The session a transport serves: pinned coordinator, statuses of refusals and failures, device messages. */
class DeviceSessionTest {
    @TempDir
    File tmp;

    Device device() throws Exception {
        return new Device(new File(tmp, "d"), 7, new Random(0), DeviceMessages.Limits.DEFAULT,
                new ReplayTrainer(new File(Vectors.dir(), "device.json"), 1e-6), null, new SecureRandom());
    }

    static String text(DeviceSession.Reply reply) {
        return new String(reply.payload, StandardCharsets.UTF_8);
    }

    @Test
    void statusesAndThePinnedCoordinator() throws Exception {
        Device d = device();
        byte[] coordinatorKey = Crypto.randomKey(new SecureRandom());
        byte[] pinned = Crypto.ed25519Public(coordinatorKey);
        DeviceSession s = new DeviceSession(d, pinned);
        DeviceSession.Reply keys = s.serve(DeviceSession.OP_PUBLIC_KEYS, new byte[0]);
        assertEquals(DeviceSession.OK, keys.status);
        assertArrayEquals(Bytes.concat(d.identity().signingPublic, d.identity().envelopePublic), keys.payload);
        // before any directory, a round cannot start: a protocol error (status 2)
        assertEquals(2, s.serve(DeviceSession.OP_SHARE_KEYS, new byte[0]).status);
        byte[] otherKey = Crypto.randomKey(new SecureRandom());
        byte[] other = new KeyDirectory(Crypto.ed25519Public(otherKey), new HashMap<>())
                .toSignedBytes(data -> Crypto.sign(otherKey, data));
        DeviceSession.Reply refused = s.serve(DeviceSession.OP_DIRECTORY, other);
        assertEquals(1, refused.status);
        assertEquals("bad signature", text(refused));
        assertEquals(DeviceSession.OK, s.serve(DeviceSession.OP_DIRECTORY, new KeyDirectory(pinned, new HashMap<>())
                .toSignedBytes(data -> Crypto.sign(coordinatorKey, data))).status);
        assertEquals(DeviceSession.FAILED, s.serve(99, new byte[0]).status);
        // a device message goes to Device.handle: no bundle yet, so an ErrorReply "not_ready"
        byte[] request = Vectors.hex(Vectors.load("messages.json").getJSONObject("device"), "round_request");
        DeviceSession.Reply r = s.serve(DeviceSession.OP_DEVICE_MESSAGE, request);
        assertEquals(DeviceSession.OK, r.status);
        assertEquals(DeviceMessages.NOT_READY, ((DeviceMessages.ErrorReply) DeviceMessages.fromBytes(r.payload,
                DeviceMessages.Limits.DEFAULT, 0)).code);
    }

    /** Whoever speaks on the transport cannot hand the device other keys than the coordinator signed. */
    @Test
    void onlyTheCoordinatorSignedDirectoryIsAccepted() throws Exception {
        Device d = pendingDevice();
        SecAggRound round = DeviceSecAggTest.round(d);
        byte[] coordinator = round.directory.coordinator();
        byte[] signed = round.signedDirectory();
        DeviceSession s = new DeviceSession(d, coordinator);
        // the neighbours' keys swapped for an attacker's: the directory it would like the device to hold
        Map<Long, KeyDirectory.DeviceKeys> swapped = new HashMap<>(round.directory.devices());
        byte[] attacker = Crypto.randomKey(new SecureRandom());
        swapped.put(10L, new KeyDirectory.DeviceKeys(Crypto.ed25519Public(attacker), swapped.get(10L).envelope));
        KeyDirectory forged = new KeyDirectory(coordinator, swapped);
        // unsigned, as the session once took it: coordinator | count | (id | signing | envelope)*
        Wire.Writer w = new Wire.Writer().raw(coordinator).u32(swapped.size());
        for (Map.Entry<Long, KeyDirectory.DeviceKeys> e : new java.util.TreeMap<>(swapped).entrySet()) {
            w.u32(e.getKey()).raw(e.getValue().signing).raw(e.getValue().envelope);
        }
        assertEquals(1, s.serve(DeviceSession.OP_DIRECTORY, w.bytes()).status);
        // signed by another key; the signature of the genuine directory on the forged body; no signature
        DeviceSession.Reply bad = s.serve(DeviceSession.OP_DIRECTORY, forged.toSignedBytes(
                data -> Crypto.sign(attacker, data)));
        assertEquals(1, bad.status);
        assertEquals("bad signature", text(bad));
        byte[] forgedFrame = forged.toSignedBytes(data -> new byte[64]);
        byte[] transplanted = Bytes.concat(java.util.Arrays.copyOf(forgedFrame, forgedFrame.length - 64),
                java.util.Arrays.copyOfRange(signed, signed.length - 64, signed.length));
        assertEquals("bad signature", text(s.serve(DeviceSession.OP_DIRECTORY, transplanted)));
        byte[] flipped = signed.clone();
        flipped[flipped.length - 1] ^= 1;
        assertEquals("bad signature", text(s.serve(DeviceSession.OP_DIRECTORY, flipped)));
        byte[] unsigned = Bytes.concat(java.util.Arrays.copyOf(signed, signed.length - 65), new byte[1]);
        assertEquals("unsigned frame", text(s.serve(DeviceSession.OP_DIRECTORY, unsigned)));
        DeviceSecAggTest.fuzz("signed directory", signed, f -> {
            DeviceSession.Reply reply = s.serve(DeviceSession.OP_DIRECTORY, f);
            if (reply.status != 1) {
                return null;       // accepted (a failure for the fuzzer) or an untyped failure
            }
            throw org.pategail.core.secagg.SecAggException.rejected(text(reply));
        });
        // none of them was taken: no directory yet, so no round starts
        byte[] start = new Wire.Writer().blob(round.signedConfig()).blob(round.envelope(DeviceSecAggTest.ME)).bytes();
        assertEquals(2, s.serve(DeviceSession.OP_START_ROUND, start).status);
        // the genuine one is
        assertEquals(DeviceSession.OK, s.serve(DeviceSession.OP_DIRECTORY, signed).status);
        assertEquals(DeviceSession.OK, s.serve(DeviceSession.OP_START_ROUND, start).status);
    }

    /** The Python coordinator's signed directory (directory_to_bytes) is accepted, and Java signs the same bytes. */
    @Test
    void thePythonSignedDirectory() throws Exception {
        JSONObject v = Vectors.load("messages.json").getJSONObject("directory");
        byte[] key = Vectors.hex(v, "coordinator_private");
        byte[] signed = Vectors.hex(v, "signed");
        KeyDirectory dir = KeyDirectory.fromSignedBytes(signed, Crypto.ed25519Public(key));
        assertEquals(v.getJSONArray("device_ids").length(), dir.devices().size());
        assertArrayEquals(signed, dir.toSignedBytes(data -> Crypto.sign(key, data)));
        DeviceSession s = new DeviceSession(device(), null);        // pinned on first use
        assertEquals(DeviceSession.OK, s.serve(DeviceSession.OP_DIRECTORY, signed).status);
        byte[] otherKey = Crypto.randomKey(new SecureRandom());
        byte[] other = new KeyDirectory(Crypto.ed25519Public(otherKey), dir.devices())
                .toSignedBytes(data -> Crypto.sign(otherKey, data));
        assertEquals("bad signature", text(s.serve(DeviceSession.OP_DIRECTORY, other)));
    }

    Device pendingDevice() throws Exception {
        DeviceSecAggTest t = new DeviceSecAggTest();
        t.tmp = tmp;
        return t.pendingDevice();
    }
}
