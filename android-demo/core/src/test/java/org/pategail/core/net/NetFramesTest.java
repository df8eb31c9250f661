package org.pategail.core.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.pategail.core.Vectors;
import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.DeviceIdentity;
import org.pategail.core.secagg.SecAggException;

/** The network frames and the request signature, byte for byte the Python SDK's (pategail.sdk.net). */
class NetFramesTest {
    static JSONObject v() throws Exception {
        return Vectors.load("net.json");
    }

    static DeviceIdentity identity(JSONObject v) throws Exception {
        return new DeviceIdentity(Vectors.hex(v, "signing_private"), Vectors.hex(v, "envelope_private"));
    }

    @Test
    void theDevicesFramesAreThePythonBytes() throws Exception {
        JSONObject v = v();
        DeviceIdentity id = identity(v);
        assertEquals(v.getString("enrolment"), Bytes.hex(NetFrames.enrolment(id, 7)));
        assertEquals(v.getString("enrolment_any"), Bytes.hex(NetFrames.enrolment(id, NetFrames.ANY_ID)));
        assertEquals(v.getString("pong"), Bytes.hex(NetFrames.pong(id, 7, 5)));
    }

    @Test
    void theCoordinatorsFramesAreReadAndChecked() throws Exception {
        JSONObject v = v();
        byte[] coordinator = Vectors.hex(v, "coordinator_public");
        NetFrames.Enrolled e = NetFrames.Enrolled.fromBytes(Vectors.hex(v, "enrolled"), null);
        assertEquals(7, e.deviceId);
        assertArrayEquals(coordinator, e.coordinator);
        assertEquals(v.getString("bundle_sha256"), e.bundleSha256);
        assertEquals(7, NetFrames.Enrolled.fromBytes(Vectors.hex(v, "enrolled"), coordinator).deviceId);
        SecAggException err = assertThrows(SecAggException.class,
                () -> NetFrames.Enrolled.fromBytes(Vectors.hex(v, "enrolled"), identity(v).signingPublic));
        assertTrue(err.getMessage().contains("not the one this device is pinned to"), err.getMessage());
        err = assertThrows(SecAggException.class,
                () -> NetFrames.Enrolled.fromBytes(Vectors.hex(v, "enrolled_by_device"), null));
        assertEquals("bad signature", err.getMessage());

        NetFrames.Order o = NetFrames.Order.fromBytes(Vectors.hex(v, "order"), coordinator, 7);
        assertEquals(123_456_789_012L, o.seq);
        assertEquals("advertise", o.work);
        assertArrayEquals("config".getBytes("US-ASCII"), o.parts[0]);
        assertArrayEquals("envelope".getBytes("US-ASCII"), o.parts[1]);
        NetFrames.Order ping = NetFrames.Order.fromBytes(Vectors.hex(v, "order_ping"), coordinator, 7);
        assertEquals(NetFrames.WORK_PING, ping.work);
        assertEquals(0, ping.parts.length);
        err = assertThrows(SecAggException.class,
                () -> NetFrames.Order.fromBytes(Vectors.hex(v, "order_other_device"), coordinator, 7));
        assertEquals("an order for device 8, not 7", err.getMessage());
        err = assertThrows(SecAggException.class,
                () -> NetFrames.Order.fromBytes(Vectors.hex(v, "order_by_device"), coordinator, 7));
        assertEquals("bad signature", err.getMessage());
        byte[] altered = Vectors.hex(v, "order");
        altered[20] ^= 1;
        assertThrows(SecAggException.class, () -> NetFrames.Order.fromBytes(altered, coordinator, 7));
    }

    @Test
    void aRequestIsSignedAsThePythonDeviceSignsIt() throws Exception {
        JSONObject v = v();
        JSONObject r = v.getJSONObject("request");
        byte[] signed = RequestAuth.signedBytes(r.getString("method"), r.getString("path"), r.getLong("device"),
                Long.parseLong(r.getString("nonce")), Vectors.hex(r, "body"));
        assertEquals(r.getString("signed"), Bytes.hex(signed));
        assertEquals(r.getString("signature"), Bytes.hex(identity(v).sign(signed)));
        RequestAuth auth = new RequestAuth();
        Map<String, String> h = auth.headers(identity(v), "GET", "/v1/poll", 7, new byte[0]);
        long first = Long.parseLong(h.get(RequestAuth.HEADER_NONCE));
        assertTrue(Long.parseLong(auth.headers(identity(v), "GET", "/v1/poll", 7, new byte[0])
                .get(RequestAuth.HEADER_NONCE)) > first);                        // strictly increasing
        assertTrue(Math.abs(first / 1e9 - System.currentTimeMillis() / 1e3) < 60);  // the wall clock, in ns
        assertEquals("7", h.get(RequestAuth.HEADER_DEVICE));
        assertEquals(128, h.get(RequestAuth.HEADER_SIGNATURE).length());
    }
}
