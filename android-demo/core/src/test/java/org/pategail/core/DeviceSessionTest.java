package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.Random;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.Wire;
import org.pategail.core.tools.ReplayTrainer;

/** The session a transport serves: pinned coordinator, statuses of refusals and failures, device messages. */
class DeviceSessionTest {
    @TempDir
    File tmp;

    @Test
    void statusesAndThePinnedCoordinator() throws Exception {
        Device d = new Device(new File(tmp, "d"), 7, new Random(0), DeviceMessages.Limits.DEFAULT,
                new ReplayTrainer(new File(Vectors.dir(), "device.json"), 1e-6), null, new SecureRandom());
        byte[] pinned = new byte[32];
        pinned[0] = 1;
        DeviceSession s = new DeviceSession(d, pinned);
        DeviceSession.Reply keys = s.serve(DeviceSession.OP_PUBLIC_KEYS, new byte[0]);
        assertEquals(DeviceSession.OK, keys.status);
        assertArrayEquals(Bytes.concat(d.identity().signingPublic, d.identity().envelopePublic), keys.payload);
        // before any directory, a round cannot start: a protocol error (status 2)
        assertEquals(2, s.serve(DeviceSession.OP_SHARE_KEYS, new byte[0]).status);
        byte[] other = new Wire.Writer().raw(new byte[32]).u32(0).bytes();
        DeviceSession.Reply refused = s.serve(DeviceSession.OP_DIRECTORY, other);
        assertEquals(1, refused.status);
        assertEquals("key directory of another coordinator", new String(refused.payload, StandardCharsets.UTF_8));
        assertEquals(DeviceSession.OK, s.serve(DeviceSession.OP_DIRECTORY,
                new Wire.Writer().raw(pinned).u32(0).bytes()).status);
        assertEquals(DeviceSession.FAILED, s.serve(99, new byte[0]).status);
        // a device message goes to Device.handle: no bundle yet, so an ErrorReply "not_ready"
        byte[] request = Vectors.hex(Vectors.load("messages.json").getJSONObject("device"), "round_request");
        DeviceSession.Reply r = s.serve(DeviceSession.OP_DEVICE_MESSAGE, request);
        assertEquals(DeviceSession.OK, r.status);
        assertEquals(DeviceMessages.NOT_READY, ((DeviceMessages.ErrorReply) DeviceMessages.fromBytes(r.payload,
                DeviceMessages.Limits.DEFAULT, 0)).code);
    }
}
