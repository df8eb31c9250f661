package org.pategail.core.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import org.json.JSONObject;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.Bundle;
import org.pategail.core.Device;
import org.pategail.core.DeviceMessages;
import org.pategail.core.Vectors;
import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.Crypto;
import org.pategail.core.secagg.DeviceIdentity;
import org.pategail.core.secagg.Wire;
import org.pategail.core.tools.MlpTrainer;

/**
 * The client against a scripted service (the JDK's HttpServer): a busy service is retried with backoff until
 * it answers; orders not signed by the pinned key, for another device or with a sequence number already seen
 * are refused without a reply; a liveness order is answered with a Pong under a request signature that
 * verifies; a service that never answers is given up in one line; and a restart enrols under the same id.
 */
class CoordinatorClientTest {
    private static final byte[] DOMAIN = "pategail-net-v1/frame".getBytes(StandardCharsets.US_ASCII);
    @TempDir
    File tmp;
    private HttpServer server;
    private final DeviceIdentity coordinator = DeviceIdentity.generate(new SecureRandom());
    private final DeviceIdentity stranger = DeviceIdentity.generate(new SecureRandom());
    private final List<byte[]> orders = Collections.synchronizedList(new ArrayList<>());
    private final List<String> replies = Collections.synchronizedList(new ArrayList<>());
    private final AtomicInteger busy = new AtomicInteger();
    private final AtomicInteger enrolments = new AtomicInteger();
    private volatile byte[] deviceKey;

    private static byte[] frame(DeviceIdentity signer, int kind, byte[] body) {
        return Wire.frame(NetFrames.MAGIC, NetFrames.VERSION, kind, body,
                head -> signer.sign(Bytes.concat(DOMAIN, head)));
    }

    private byte[] order(DeviceIdentity signer, long to, long seq, int work, byte[]... parts) {
        Wire.Writer w = new Wire.Writer().u32(to).u64(seq).u8(work).u8(parts.length);
        for (byte[] part : parts) {
            w.blob(part);
        }
        return frame(signer, NetFrames.KIND_ORDER, w.bytes());
    }

    private static void answer(HttpExchange x, int status, byte[] body) throws IOException {
        x.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
        try (OutputStream out = x.getResponseBody()) {
            out.write(body);
        }
    }

    private String start() throws Exception {
        File bundle = new File(Vectors.dir(), "bundle");
        String sha = Bundle.sha256File(new File(bundle, Bundle.MANIFEST));
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/v1/coordinator", x -> answer(x, 200, coordinator.signingPublic));
        server.createContext("/v1/enrol", x -> {
            byte[] body = readBody(x);
            if (busy.getAndDecrement() > 0) {
                answer(x, 503, new byte[0]);
                return;
            }
            enrolments.incrementAndGet();
            Wire.Unframed f;
            try {
                f = Wire.unframe(body, NetFrames.MAGIC, NetFrames.VERSION, NetFrames.KIND_ENROLMENT);
                deviceKey = new Wire.Reader(f.body).raw(32);
            } catch (Exception err) {
                answer(x, 400, new byte[0]);
                return;
            }
            answer(x, 200, frame(coordinator, NetFrames.KIND_ENROLLED, new Wire.Writer().u32(42)
                    .raw(coordinator.signingPublic).raw(Bytes.unhex(sha)).bytes()));
        });
        server.createContext("/v1/bundle/", x -> {
            String name = x.getRequestURI().getPath().substring("/v1/bundle/".length());
            answer(x, 200, Bundle.readAll(new File(bundle, name)));
        });
        server.createContext("/v1/poll", x -> {
            readBody(x);
            if (!verified(x, new byte[0])) {
                answer(x, 401, new byte[0]);
                return;
            }
            byte[] next = orders.isEmpty() ? null : orders.remove(0);
            answer(x, next == null ? 410 : 200, next == null ? new byte[0] : next);
        });
        server.createContext("/v1/reply", x -> {
            byte[] body = readBody(x);
            replies.add(x.getRequestHeaders().getFirst(CoordinatorClient.HEADER_SEQ) + ":" + verified(x, body) + ":"
                    + Bytes.hex(body));
            answer(x, 204, new byte[0]);
        });
        server.start();
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    private static byte[] readBody(HttpExchange x) throws IOException {
        return Bundle.readAll(x.getRequestBody());
    }

    /** The request's signature verifies under the enrolled device key (what the service checks). */
    private boolean verified(HttpExchange x, byte[] body) {
        String id = x.getRequestHeaders().getFirst(RequestAuth.HEADER_DEVICE);
        String nonce = x.getRequestHeaders().getFirst(RequestAuth.HEADER_NONCE);
        String sig = x.getRequestHeaders().getFirst(RequestAuth.HEADER_SIGNATURE);
        if (id == null || nonce == null || sig == null) {
            return false;
        }
        byte[] signed = RequestAuth.signedBytes(x.getRequestMethod(), x.getRequestURI().getPath(), Long.parseLong(id),
                Long.parseLong(nonce), body);
        return Crypto.verify(deviceKey, Bytes.unhex(sig), signed);
    }

    @AfterEach
    void stop() {
        if (server != null) {
            server.stop(0);
        }
    }

    private CoordinatorClient client(String url, double giveUpS) throws Exception {
        int[][] days = Vectors.intRows(Vectors.load("features.json").getJSONArray("days"));
        SecureRandom secure = new SecureRandom();
        CoordinatorClient.Runtime runtime = new CoordinatorClient.Runtime((root, id, rng) -> new Device(root, id, rng,
                DeviceMessages.Limits.DEFAULT, new MlpTrainer(), null, secure), secure, 0);
        return new CoordinatorClient(url, null, new File(tmp, "store"), runtime, () -> days, null, NetFrames.ANY_ID,
                null, new CoordinatorClient.RetryPolicy(0.01, 0.05, giveUpS), 1.0, new Random(3));
    }

    @Test
    void aBusyServiceIsRetriedAndOnlyTheCoordinatorsOrdersForThisDeviceAreCarriedOut() throws Exception {
        String url = start();
        busy.set(2);                                        // two 503s before the enrolment is answered
        CoordinatorClient c = client(url, 10);
        orders.add(order(stranger, 42, 10, NetFrames.WORKS.indexOf(NetFrames.WORK_PING)));     // not the coordinator
        orders.add(order(coordinator, 41, 11, NetFrames.WORKS.indexOf(NetFrames.WORK_PING)));  // another device
        orders.add(order(coordinator, 42, 12, NetFrames.WORKS.indexOf(NetFrames.WORK_PING)));  // this one
        orders.add(order(coordinator, 42, 12, NetFrames.WORKS.indexOf(NetFrames.WORK_PING)));  // replayed
        c.run();                                            // until the service answers 410
        assertEquals(42, c.deviceId());
        assertEquals(1, enrolments.get());
        assertEquals(1, replies.size(), replies.toString());
        String[] reply = replies.get(0).split(":");
        assertEquals("12", reply[0]);
        assertEquals("true", reply[1]);                     // signed by the enrolled key
        assertEquals(Bytes.hex(NetFrames.pong(c.device().identity(), 42, 12)), reply[2]);
        JSONObject state = new JSONObject(new String(Bundle.readAll(new File(tmp, "store/network.json")),
                StandardCharsets.UTF_8));
        assertEquals(42, state.getLong("device_id"));
        assertEquals(12, state.getLong("last_seq"));
        assertEquals(Bytes.hex(coordinator.signingPublic), state.getString("coordinator"));
        assertNotNull(c.device().bundle());

        // restarted on its store: the same keys, so the same id; the order seen last is still refused
        CoordinatorClient again = client(url, 10);
        orders.add(order(coordinator, 42, 12, NetFrames.WORKS.indexOf(NetFrames.WORK_PING)));
        again.run();
        assertEquals(42, again.deviceId());
        assertArrayEquals(c.device().identity().signingPublic, deviceKey);
        assertEquals(1, replies.size());
    }

    @Test
    void aBundleOrderInstallsThatBundleOrIsRefusedWithAnEmptyReply() throws Exception {
        String url = start();
        CoordinatorClient c = client(url, 10);
        String served = Bundle.sha256File(new File(new File(Vectors.dir(), "bundle"), Bundle.MANIFEST));
        int work = NetFrames.WORKS.indexOf(NetFrames.WORK_BUNDLE);
        assertEquals(7, work);                              // the index the Python SDK gives it
        orders.add(order(coordinator, 42, 10, work, served.getBytes(StandardCharsets.US_ASCII)));
        String other = "0".repeat(64);                      // the service serves another bundle than the order names
        orders.add(order(coordinator, 42, 11, work, other.getBytes(StandardCharsets.US_ASCII)));
        orders.add(order(coordinator, 42, 12, work, "not a sha".getBytes(StandardCharsets.US_ASCII)));
        c.run();
        assertEquals(3, replies.size(), replies.toString());
        assertEquals("10:true:" + Bytes.hex(NetFrames.pong(c.device().identity(), 42, 10)), replies.get(0));
        assertEquals("11:true:", replies.get(1));           // refused: nothing installed
        assertEquals("12:true:", replies.get(2));
        assertEquals(served, c.device().bundle().sha256);
    }

    @Test
    void aServiceThatNeverAnswersIsGivenUpInOneLine() throws Exception {
        String url = start();
        busy.set(Integer.MAX_VALUE);
        CoordinatorClient c = client(url, 0.3);
        long t0 = System.nanoTime();
        ServiceException err = assertThrows(ServiceException.class, c::run);
        assertTrue(err.getMessage().endsWith("no answer for 0.3 s (HTTP 503)"), err.getMessage());
        assertTrue((System.nanoTime() - t0) / 1e9 < 5);
    }
}
