package org.pategail.core;

import java.io.File;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;

import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;
import org.pategail.core.secagg.Bytes;

/** The cross-language vectors written by android-demo/vectors/generate.py (the Python SDK's outputs). */
public final class Vectors {
    private Vectors() {
    }

    /** The vectors directory: -Dpategail.vectors, else ../vectors from the core's directory. */
    public static File dir() {
        String p = System.getProperty("pategail.vectors");
        File d = p != null ? new File(p) : new File("../vectors");
        if (!new File(d, "crypto.json").isFile()) {
            throw new IllegalStateException(d + ": no test vectors (set -Dpategail.vectors)");
        }
        return d;
    }

    public static JSONObject load(String name) throws IOException, JSONException {
        return new JSONObject(new String(Bundle.readAll(new File(dir(), name)), StandardCharsets.UTF_8));
    }

    public static byte[] hex(JSONObject o, String key) throws JSONException {
        return Bytes.unhex(o.getString(key));
    }

    /** Decimal strings of unsigned 64-bit words as Java longs (two's complement). */
    public static long[] words(JSONArray a) throws JSONException {
        long[] out = new long[a.length()];
        for (int i = 0; i < out.length; i++) {
            out[i] = new BigInteger(a.getString(i)).longValue();
        }
        return out;
    }

    public static int[] ints(JSONArray a) throws JSONException {
        int[] out = new int[a.length()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.getInt(i);
        }
        return out;
    }

    public static long[] longs(JSONArray a) throws JSONException {
        long[] out = new long[a.length()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.getLong(i);
        }
        return out;
    }

    public static double[] doubles(JSONArray a) throws JSONException {
        double[] out = new double[a.length()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.getDouble(i);
        }
        return out;
    }

    public static int[][] intRows(JSONArray a) throws JSONException {
        int[][] out = new int[a.length()][];
        for (int i = 0; i < out.length; i++) {
            out[i] = ints(a.getJSONArray(i));
        }
        return out;
    }
}
