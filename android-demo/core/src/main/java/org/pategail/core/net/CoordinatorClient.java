package org.pategail.core.net;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.logging.Logger;

import org.json.JSONException;
import org.json.JSONObject;
import org.pategail.core.Bundle;
import org.pategail.core.BundleException;
import org.pategail.core.Device;
import org.pategail.core.DeviceMessages;
import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.DeviceIdentity;
import org.pategail.core.secagg.KeyDirectory;
import org.pategail.core.secagg.SecAggException;

/**
 * A device taking part in a served run over HTTP(S) — the Python SDK's {@code pategail.sdk.net.client.DeviceClient}
 * on the Java core: enrol, install the run's bundle, then poll for signed orders and answer them (a phone accepts
 * no inbound connection).
 *
 * <p>Everything it sends is a frame of the protocol: its enrolment (public keys), its replies to device-protocol
 * requests (Ack / ErrorReply), its secure-aggregation frames and its liveness answers; never a day. Every request
 * after enrolment is signed ({@link RequestAuth}); every order is checked — signed by the pinned coordinator key,
 * addressed to this device, its sequence number above the last one seen — before it touches the device. A failed
 * connection or a busy service is retried with exponential backoff and full jitter; a device restarted on the same
 * store resumes: same identity and id (kept in {@code network.json}, the Python SDK's format), same bundle,
 * discriminator, round log and ledger.
 *
 * <p>One thread runs it; {@link #stop} may be called from any thread. Every use of the device is synchronized on
 * it, so an app's screen may use the same {@link Device} (its {@link DeviceOpener} hands out that one).
 */
public final class CoordinatorClient {
    /** The device's network state in its store: server, id, pinned coordinator key, last order seen. */
    public static final String STATE_FILE = "network.json";
    public static final String HEADER_SEQ = "X-Pategail-Seq";
    public static final String HEADER_TOKEN = "X-Pategail-Enrol-Token";
    private static final java.util.Set<Integer> TRANSIENT = new java.util.HashSet<>(
            java.util.Arrays.asList(408, 425, 429, 500, 502, 503, 504));
    private static final Logger LOG = Logger.getLogger(CoordinatorClient.class.getName());

    /** Exponential backoff with full jitter: the k-th wait is uniform in [0, min(capS, firstS · 2^k)]; a request
     * is given up after {@code giveUpS} seconds without an answer. */
    public static final class RetryPolicy {
        public final double firstS, capS, giveUpS;

        public RetryPolicy(double firstS, double capS, double giveUpS) {
            this.firstS = firstS;
            this.capS = capS;
            this.giveUpS = giveUpS;
        }

        public static final RetryPolicy DEFAULT = new RetryPolicy(0.5, 30.0, 900.0);
    }

    /** The owner's days (n, 48), asked for once, when the store holds none yet. */
    public interface DaysSource {
        int[][] days() throws IOException, ServiceException;
    }

    /** Told of every vector the device uploads (masked), with the round of the request that made it. */
    public interface UploadListener {
        void uploaded(long round, boolean environment, double[] values) throws IOException;
    }

    /** Opens the device on its store once its id is known (after enrolment): on a phone with ONNX Runtime's
     * trainer and policy runtime, on the JVM with {@code MlpTrainer}. {@code minibatches} must be the device's
     * minibatch generator: the client seeds it from (seed, id, round) before every request. */
    public interface DeviceOpener {
        Device open(File store, long deviceId, Random minibatches) throws IOException;
    }

    /** What the device runs on: how it is opened, its secure randomness (identity keys), its minibatch seed. */
    public static final class Runtime {
        public final DeviceOpener opener;
        public final SecureRandom secure;
        public final long seed;

        public Runtime(DeviceOpener opener, SecureRandom secure, long seed) {
            this.opener = opener;
            this.secure = secure;
            this.seed = seed;
        }
    }

    private final String server;
    private final File store;
    private final HttpTransport http;
    private final Runtime runtime;
    private final DaysSource daysSource;
    private final long requestedId;
    private final String token;
    private final RetryPolicy retry;
    private final double pollWaitS;
    private final Random jitter;
    private final RequestAuth auth = new RequestAuth();
    private final JSONObject state;
    private final Random minibatches = new Random();
    private volatile boolean stopped;
    private UploadListener uploads;
    private DeviceIdentity identity;
    private KeyDirectory directory;
    private Device device;
    private long deviceId = -1;
    private long lastRequestRound = -1;
    private int ordersHandled;

    /**
     * Checks the address, the CA file and the store before anything is written.
     *
     * @param coordinatorKey pin this coordinator key (null: trust the first one seen)
     * @param requestedId    the id to enrol as ({@link NetFrames#ANY_ID}: any)
     * @param token          the single-use enrolment token from the operator (null when not needed)
     */
    public CoordinatorClient(String server, File caFile, File store, Runtime runtime, DaysSource days,
                             byte[] coordinatorKey, long requestedId, String token, RetryPolicy retry,
                             double pollWaitS, Random jitter) throws ServiceException {
        this.server = server.endsWith("/") ? server.substring(0, server.length() - 1) : server;
        this.http = new HttpTransport(this.server, caFile, pollWaitS + 30.0);
        checkStore(store);
        this.store = store;
        this.runtime = runtime;
        this.daysSource = days;
        this.requestedId = requestedId;
        this.token = token;
        this.retry = retry;
        this.pollWaitS = pollWaitS;
        this.jitter = jitter;
        this.state = loadState();
        if (coordinatorKey != null) {
            String pinned = state.optString("coordinator", null);
            if (pinned != null && !pinned.equals(Bytes.hex(coordinatorKey))) {
                throw new ServiceException(store + ": this device belongs to the run of coordinator key "
                        + pinned.substring(0, 16) + "…, not " + Bytes.hex(coordinatorKey).substring(0, 16)
                        + "…: give it a new --store to join this run");
            }
            put("coordinator", Bytes.hex(coordinatorKey));
        }
    }

    /** A writable directory (made when missing), or a one-line ServiceException. */
    public static void checkStore(File store) throws ServiceException {
        for (File p = store.getAbsoluteFile(); p != null; p = p.getParentFile()) {
            if (p.exists() && !p.isDirectory()) {
                throw new ServiceException("--store " + store + ": " + p + " is a file, not a directory");
            }
            if (p.exists()) {
                break;
            }
        }
        File probe = new File(store, ".write-probe");
        try {
            if (!store.isDirectory() && !store.mkdirs()) {
                throw new IOException("cannot create it");
            }
            Device.writeAtomic(probe, new byte[0]);
            if (!probe.delete()) {
                throw new IOException("cannot delete " + probe);
            }
        } catch (IOException err) {
            throw new ServiceException("--store " + store + ": not a writable directory (" + err.getMessage() + ")");
        }
    }

    // -- state ---------------------------------------------------------------------------------------------
    private JSONObject loadState() throws ServiceException {
        File path = new File(store, STATE_FILE);
        if (!path.isFile()) {
            return new JSONObject();
        }
        try {
            return new JSONObject(new String(Bundle.readAll(path), StandardCharsets.UTF_8));
        } catch (IOException | JSONException err) {
            throw new ServiceException(path + ": unreadable network state (" + err.getMessage()
                    + "); delete it to enrol again");
        }
    }

    private void put(String key, Object value) {
        try {
            state.put(key, value);
        } catch (JSONException err) {
            throw new IllegalArgumentException(err);
        }
    }

    private void saveState() throws IOException {
        Device.writeAtomic(new File(store, STATE_FILE), state.toString().getBytes(StandardCharsets.UTF_8));
    }

    private byte[] coordinator() {
        String pinned = state.optString("coordinator", null);
        return pinned == null ? null : Bytes.unhex(pinned);
    }

    public long deviceId() {
        return deviceId;
    }

    public Device device() {
        return device;
    }

    public int ordersHandled() {
        return ordersHandled;
    }

    public void setUploadListener(UploadListener listener) {
        this.uploads = listener;
    }

    /** Ends {@link #run} (also while it waits to retry) at its next step. */
    public void stop() {
        stopped = true;
    }

    private DeviceIdentity identity() throws IOException {
        if (identity == null) {
            identity = Device.loadOrCreateIdentity(new File(store, Device.IDENTITY_FILE), runtime.secure);
        }
        return identity;
    }

    // -- HTTP ----------------------------------------------------------------------------------------------
    private static final class Stopped extends Exception {
        private static final long serialVersionUID = 1L;
    }

    /** One request, retried with backoff and jitter while the service is unreachable or busy; its answer for a
     * status in {@code ok} or 409/410, a ServiceException for any other. */
    private HttpTransport.Response call(String method, String path, String query, byte[] body, boolean signed,
                                        Map<String, String> headers, int... ok)
            throws ServiceException, IOException, Stopped {
        long firstFailure = -1;
        int attempt = 0;
        while (true) {
            Map<String, String> h = new HashMap<>(headers == null ? Collections.<String, String>emptyMap() : headers);
            if (signed) {
                h.putAll(auth.headers(identity(), method, path, deviceId, body));
            }
            String reason;
            try {
                HttpTransport.Response r = http.request(method, path + query, body, h);
                for (int s : ok) {
                    if (r.status == s) {
                        return r;
                    }
                }
                if (r.status == 409 || r.status == 410) {
                    return r;
                }
                if (!TRANSIENT.contains(r.status)) {
                    String text = new String(r.body, 0, Math.min(200, r.body.length), StandardCharsets.UTF_8);
                    throw new ServiceException(server + path + ": the service refused the request (" + r.status + ": "
                            + text + ")");
                }
                reason = "HTTP " + r.status;
            } catch (HttpTransport.TransientFailure err) {
                reason = err.getMessage();
            }
            long now = System.nanoTime();
            if (firstFailure < 0) {
                firstFailure = now;
            }
            if ((now - firstFailure) / 1e9 > retry.giveUpS) {
                throw new ServiceException(server + ": no answer for " + fmt(retry.giveUpS) + " s (" + reason + ")");
            }
            double wait = jitter.nextDouble() * Math.min(retry.capS, retry.firstS * Math.pow(2, attempt));
            attempt++;
            LOG.info("device " + deviceId + ": " + method + " " + path + " failed (" + reason + "); retrying in "
                    + String.format(java.util.Locale.ROOT, "%.1f", wait) + " s");
            sleep(wait);
        }
    }

    private void sleep(double seconds) throws Stopped {
        long end = System.nanoTime() + (long) (seconds * 1e9);
        try {
            while (!stopped) {
                long left = end - System.nanoTime();
                if (left <= 0) {
                    return;
                }
                Thread.sleep(Math.min(100, left / 1_000_000 + 1));
            }
        } catch (InterruptedException err) {
            Thread.currentThread().interrupt();
        }
        throw new Stopped();
    }

    private static String fmt(double v) {
        return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
    }

    // -- set-up --------------------------------------------------------------------------------------------
    /** Enrol (again: the service knows the keys and gives the same id back) and pin the coordinator. */
    NetFrames.Enrolled enrol() throws ServiceException, IOException, Stopped {
        if (coordinator() != null) {
            checkCoordinator();
        }
        long requested = state.has("device_id") ? state.optLong("device_id") : requestedId;
        Map<String, String> headers = token == null ? null : Collections.singletonMap(HEADER_TOKEN, token);
        HttpTransport.Response r = call("POST", "/v1/enrol", "", NetFrames.enrolment(identity(), requested), false,
                headers, 200);
        NetFrames.Enrolled enrolled;
        try {
            enrolled = NetFrames.Enrolled.fromBytes(r.body, coordinator());
        } catch (SecAggException err) {
            throw new ServiceException(server + ": refused the service's enrolment answer (" + err.getMessage() + ")");
        }
        if (state.has("device_id") && state.optLong("device_id") != enrolled.deviceId) {
            throw new ServiceException(server + " gave id " + enrolled.deviceId + ", this device is "
                    + state.optLong("device_id"));
        }
        deviceId = enrolled.deviceId;
        put("server", server);
        put("device_id", enrolled.deviceId);
        put("coordinator", Bytes.hex(enrolled.coordinator));
        saveState();
        return enrolled;
    }

    /** A store pinned to a coordinator: the service must be that one (a store from another run is told so). */
    private void checkCoordinator() throws ServiceException, IOException, Stopped {
        HttpTransport.Response r = call("GET", "/v1/coordinator", "", new byte[0], false, null, 200, 404);
        byte[] pinned = coordinator();
        if (r.status == 200 && r.body.length == 32 && !java.util.Arrays.equals(r.body, pinned)) {
            throw new ServiceException(store + " belongs to another run (coordinator key "
                    + Bytes.hex(pinned).substring(0, 16) + "…, this service's is "
                    + Bytes.hex(r.body).substring(0, 16)
                    + "…): give the device a new --store to join this run, or point it at its own run's service");
        }
    }

    /** Give the store its days (first start; checked before anything else is written), enrol, open the device
     * and install the run's bundle. */
    public Device prepare() throws ServiceException, IOException {
        try {
            return prepareOrStop();
        } catch (Stopped err) {
            return null;
        }
    }

    private Device prepareOrStop() throws ServiceException, IOException, Stopped {
        if (!new File(store, Device.DAYS_FILE).isFile()) {
            int[][] days = daysSource == null ? null : daysSource.days();
            if (days == null || days.length == 0) {
                throw new ServiceException(store + ": the device holds no days; give it its days (--days FILE)");
            }
            for (int i = 0; i < days.length; i++) {
                if (days[i].length != DeviceMessages.SLOTS) {
                    throw new ServiceException("days: row " + i + ": expected " + DeviceMessages.SLOTS + " slots");
                }
            }
            Device.writeDays(store, days);
        }
        NetFrames.Enrolled enrolled = enrol();
        device = runtime.opener.open(store, deviceId, minibatches);
        if (device.bundle() == null || !device.bundle().sha256.equals(enrolled.bundleSha256)) {
            installBundle(enrolled.bundleSha256);
        }
        LOG.info("device " + deviceId + " ready: " + device.nDays() + " days, bundle "
                + enrolled.bundleSha256.substring(0, 12));
        return device;
    }

    private void installBundle(String sha256) throws ServiceException, IOException, Stopped {
        File download = new File(store, ".bundle-download");
        if (!download.isDirectory() && !download.mkdirs()) {
            throw new IOException(download + ": cannot create");
        }
        byte[] manifest = call("GET", "/v1/bundle/manifest.json", "", new byte[0], false, null, 200).body;
        List<String> names = new ArrayList<>();
        try {
            JSONObject files = new JSONObject(new String(manifest, StandardCharsets.UTF_8)).getJSONObject("files");
            for (Iterator<?> it = files.keys(); it.hasNext(); ) {
                names.add((String) it.next());
            }
        } catch (JSONException | ClassCastException err) {
            throw new ServiceException(server + ": the bundle's manifest is unreadable");
        }
        Collections.sort(names);
        for (String name : names) {
            if (name.contains("/") || name.contains("\\") || name.startsWith(".")) {
                throw new ServiceException(server + ": bundle file name '" + name + "' refused");
            }
            byte[] data = call("GET", "/v1/bundle/" + name, "", new byte[0], false, null, 200).body;
            Device.writeAtomic(new File(download, name), data);
        }
        Device.writeAtomic(new File(download, Bundle.MANIFEST), manifest);
        try {
            device.installBundle(download, sha256);             // every hash checked
        } catch (BundleException err) {
            throw new ServiceException(err.getMessage());
        }
    }

    private KeyDirectory keyDirectory() throws ServiceException, IOException, Stopped {
        if (directory == null) {
            byte[] body = call("GET", "/v1/directory", "", new byte[0], true, null, 200).body;
            try {
                directory = KeyDirectory.fromSignedBytes(body, coordinator());
            } catch (SecAggException err) {
                throw new ServiceException(server + ": refused the key directory (" + err.getMessage() + ")");
            }
        }
        return directory;
    }

    // -- the loop ------------------------------------------------------------------------------------------
    /** Prepare, then poll and answer orders until the run is over (the service answers 410) or {@link #stop}. */
    public void run() throws ServiceException, IOException {
        try {
            if (device == null) {
                prepareOrStop();
            }
            while (!stopped) {
                HttpTransport.Response r = call("GET", "/v1/poll", "?wait=" + fmt(pollWaitS), new byte[0], true,
                        null, 200, 204);
                if (r.status == 410) {
                    LOG.info("device " + deviceId + ": the run is over (" + ordersHandled + " orders answered)");
                    return;
                }
                if (r.status == 200) {
                    answer(r.body);
                }
            }
        } catch (Stopped err) {
            LOG.info("device " + deviceId + ": stopped while waiting for the service");
        }
    }

    private byte[] carryOut(NetFrames.Order order) throws SecAggException, ServiceException, IOException, Stopped {
        if (NetFrames.WORK_PING.equals(order.work)) {
            return NetFrames.pong(identity(), deviceId, order.seq);
        }
        if (NetFrames.WORK_BUNDLE.equals(order.work)) {     // the run's bundle changed (a released cell table)
            String sha256 = order.parts.length == 1
                    ? new String(order.parts[0], StandardCharsets.US_ASCII) : "";
            if (!sha256.matches("[0-9a-f]{64}")) {
                throw SecAggException.rejected("a bundle order carries one SHA-256 in hex");
            }
            synchronized (device) {
                if (device.bundle() == null || !device.bundle().sha256.equals(sha256)) {
                    try {
                        installBundle(sha256);
                    } catch (ServiceException err) {        // not that bundle: the device keeps its own
                        throw SecAggException.rejected(err.getMessage());
                    }
                }
            }
            LOG.info("device " + deviceId + ": bundle " + sha256.substring(0, 12) + " installed");
            return NetFrames.pong(identity(), deviceId, order.seq);       // signed: done
        }
        if (NetFrames.WORK_REQUEST.equals(order.work)) {
            if (order.parts.length != 1) {
                throw SecAggException.rejected("a request order carries one message, not " + order.parts.length);
            }
            long round = DeviceMessages.peekRound(order.parts[0]);
            // the minibatch draws of a round come from (seed, id, round): a round answered twice draws the same
            minibatches.setSeed(mix(runtime.seed, deviceId, Math.max(round, 0)));
            byte[] reply;
            synchronized (device) {         // Device is not thread-safe: an app's screen takes turns with this loop
                reply = device.handle(order.parts[0]);
            }
            lastRequestRound = round;
            return reply;
        }
        KeyDirectory dir = keyDirectory();
        double[] values;
        boolean environment;
        byte[] reply;
        synchronized (device) {
            values = "input".equals(order.work) && uploads != null ? device.pending() : null;
            environment = device.pendingIsEnvironment();
            reply = device.secaggStep(dir, order.work, order.parts);
        }
        if (values != null) {
            uploads.uploaded(lastRequestRound, environment, values);
        }
        return reply;
    }

    /** One 64-bit seed from (seed, id, round) (SplitMix64's finaliser over each in turn). */
    static long mix(long... parts) {
        long h = 0x9E3779B97F4A7C15L;
        for (long p : parts) {
            h ^= p;
            h *= 0xBF58476D1CE4E5B9L;
            h ^= h >>> 31;
            h *= 0x94D049BB133111EBL;
            h ^= h >>> 29;
        }
        return h;
    }

    private void answer(byte[] data) throws ServiceException, IOException, Stopped {
        NetFrames.Order order;
        try {
            order = NetFrames.Order.fromBytes(data, coordinator(), deviceId);
        } catch (SecAggException err) {
            LOG.warning("device " + deviceId + ": an order refused (" + err.getMessage() + ")");
            return;
        }
        if (order.seq <= state.optLong("last_seq", 0)) {
            LOG.warning("device " + deviceId + ": a replayed order refused (seq " + order.seq + ")");
            return;
        }
        put("last_seq", order.seq);
        saveState();
        byte[] reply;
        try {
            reply = carryOut(order);
        } catch (SecAggException | RuntimeException err) {    // the device stops this step: an empty reply says so
            LOG.info("device " + deviceId + ": " + order.work + " order refused (" + err.getClass().getSimpleName()
                    + ": " + err.getMessage() + ")");
            reply = new byte[0];
        }
        HttpTransport.Response r = call("POST", "/v1/reply", "", reply, true,
                Collections.singletonMap(HEADER_SEQ, Long.toString(order.seq)), 200, 204);
        if (r.status == 409) {
            LOG.info("device " + deviceId + ": the reply to " + order.work + " came too late");
        }
        ordersHandled++;
    }
}
