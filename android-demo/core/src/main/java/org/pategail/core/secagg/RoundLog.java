package org.pategail.core.secagg;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;

import org.json.JSONException;
import org.json.JSONObject;

/**
 * The last round a device accepted, per coordinator key, kept on disk so that a restart (or a new client)
 * does not reopen old rounds: the Python SDK's {@code RoundLog}, same file ({@code secagg-rounds.json} in the
 * device directory) and format (a JSON object: coordinator public key in hex -> last accepted round id).
 *
 * <p>A round is accepted only if its id is newer than every round accepted before from the same coordinator
 * key; {@link #accept} writes the log (temp file, then rename) before it returns, so a crash can lose at most
 * a round the device never answered. A log that cannot be read refuses every round: forgetting would reopen
 * old rounds, so the app must repair or reset the file.
 */
public final class RoundLog {
    private final File path;
    private Map<String, Long> last = new TreeMap<>();
    private final String unreadable;

    /** An in-memory log (nothing survives the object). */
    public RoundLog() {
        this(null);
    }

    /** The log persisted at {@code path} (null: in memory only); read now if the file exists. */
    public RoundLog(File path) {
        this.path = path;
        String error = null;
        if (path != null && path.isFile()) {
            try {
                last = parse(new String(readAll(path), StandardCharsets.UTF_8));
            } catch (IOException | JSONException | IllegalArgumentException err) {
                error = path + ": unreadable round log (" + err.getMessage() + ")";
            }
        }
        this.unreadable = error;
    }

    private static Map<String, Long> parse(String text) throws JSONException {
        JSONObject obj = new JSONObject(text);
        Map<String, Long> out = new TreeMap<>();
        for (Iterator<String> keys = obj.keys(); keys.hasNext(); ) {
            String key = keys.next();
            Object value = obj.get(key);
            if (!(value instanceof Integer || value instanceof Long)) {
                throw new IllegalArgumentException("round id of " + key + " is not an integer: " + value);
            }
            out.put(key, ((Number) value).longValue());
        }
        return out;
    }

    static byte[] readAll(File f) throws IOException {
        try (InputStream in = new FileInputStream(f)) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buf = new byte[4096];
            for (int n; (n = in.read(buf)) > 0; ) {
                out.write(buf, 0, n);
            }
            return out.toByteArray();
        }
    }

    private void requireReadable() throws SecAggException {
        if (unreadable != null) {
            throw SecAggException.rejected(unreadable);
        }
    }

    /** The last round accepted from {@code coordinator} (-1 if none). */
    public long last(byte[] coordinator) {
        Long v = last.get(Bytes.hex(coordinator));
        return v == null ? -1 : v;
    }

    /** Rejected unless {@code roundId} is newer than the last round accepted from {@code coordinator}. */
    public void check(byte[] coordinator, long roundId) throws SecAggException {
        requireReadable();
        long previous = last(coordinator);
        if (roundId <= previous) {
            throw SecAggException.rejected("round " + roundId + " is not newer than " + previous + " (replay)");
        }
    }

    /** Record {@code roundId} (checked first); on disk before it returns. A failed write is an abort. */
    public void accept(byte[] coordinator, long roundId) throws SecAggException {
        check(coordinator, roundId);
        Map<String, Long> updated = new TreeMap<>(last);
        updated.put(Bytes.hex(coordinator), roundId);
        if (path != null) {
            try {
                write(path, toJson(updated).getBytes(StandardCharsets.UTF_8));
            } catch (IOException err) {
                throw SecAggException.abort("cannot write the round log " + path + ": " + err.getMessage());
            }
        }
        last = updated;
    }

    /** Python's {@code json.dumps(log, sort_keys=True)}: keys are hex, values integers. */
    static String toJson(Map<String, Long> log) {
        StringBuilder sb = new StringBuilder("{");
        for (Map.Entry<String, Long> e : log.entrySet()) {
            if (sb.length() > 1) {
                sb.append(", ");
            }
            sb.append('"').append(e.getKey()).append("\": ").append(e.getValue());
        }
        return sb.append('}').toString();
    }

    /** {@code data} written whole to a temporary file, synced, then renamed over {@code path}. */
    static void write(File path, byte[] data) throws IOException {
        File tmp = new File(path.getAbsoluteFile().getParentFile(), path.getName() + ".tmp");
        try (FileOutputStream out = new FileOutputStream(tmp)) {
            out.write(data);
            out.getFD().sync();
        }
        if (!tmp.renameTo(path)) {
            throw new IOException("cannot replace " + path);
        }
    }
}
