package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Random;

import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.secagg.Accounting;
import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.SecAggException;
import org.pategail.core.tools.MlpTrainer;

/**
 * A run that releases its cell table privately, as the Python device takes part in it (cells.json): the visited
 * vector and the public map a released table's bundle carries read as the SDK reads them; a device on the public
 * map's bundle answers the CellReleaseRequest with the Python device's Ack and vector, refuses it (and every other
 * request) where the Python device does, with its reply's bytes, and holds the visited vector to the cell
 * release's floor in the secure round; on the released table it reads its days through the map — the same days,
 * home, environment contribution and features as the Python device — and refuses bundles that would read them
 * wrong with the Python device's line.
 */
class CellReleaseTest {
    @TempDir
    File tmp;
    static JSONObject v;
    static JSONObject dev;
    static int[][] days;

    @BeforeAll
    static void load() throws Exception {
        v = Vectors.load("cells.json");
        dev = v.getJSONObject("device");
        days = Vectors.intRows(Vectors.load("features.json").getJSONArray("days"));
    }

    static List<Integer> ones(double[] vector) {
        List<Integer> out = new ArrayList<>();
        for (int i = 0; i < vector.length; i++) {
            if (vector[i] != 0) {
                assertEquals(1.0, vector[i], 0.0);
                out.add(i);
            }
        }
        return out;
    }

    static List<Integer> list(JSONArray a) throws Exception {
        List<Integer> out = new ArrayList<>();
        for (int i = 0; i < a.length(); i++) {
            out.add(a.getInt(i));
        }
        return out;
    }

    @Test
    void visitedVectorsAreThePythonSdks() throws Exception {
        JSONArray cases = v.getJSONArray("visited");
        assertEquals(8, cases.length());
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            double[] got = CellUniverse.visitedVector(Vectors.intRows(c.getJSONArray("days")), c.getInt("n_universe"),
                    c.getLong("max_cells"));
            assertEquals(c.getInt("n_universe"), got.length);
            assertEquals(list(c.getJSONArray("ones")), ones(got), c.getString("name") + " " + c.getInt("max_cells"));
        }
        assertThrows(IllegalArgumentException.class, () -> CellUniverse.visitedVector(days, 4210, 0));
        assertThrows(IllegalArgumentException.class, () -> CellUniverse.visitedVector(days, 100, 5));
    }

    @Test
    void thePublicMapIsReadAsThePythonSdkReadsIt() throws Exception {
        double[][] cells = doubleRows(v.getJSONObject("universe").getJSONArray("cells"));
        JSONArray cases = v.getJSONObject("universe").getJSONArray("cases");
        assertEquals(16, cases.length());
        File f = new File(tmp, "universe.csv");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            String name = c.getString("name");
            BundleTest.write(f, c.getString("text").getBytes(StandardCharsets.UTF_8));
            try {
                Bundle.Universe u = Bundle.readUniverse(f, c.getInt("n_universe"), cells);
                assertTrue(c.isNull("refused"), name + ": accepted, the SDK refuses it: " + c.opt("refused"));
                assertArrayEquals(Vectors.ints(c.getJSONArray("table")), u.table, name);
                assertArrayEquals(doubleRows(c.getJSONArray("universe")), u.squares, name);
            } catch (BundleException err) {
                assertFalse(c.isNull("refused"), name + ": refused, the SDK takes it: " + err.getMessage());
                assertEquals(f + ": " + c.getString("refused"), err.getMessage(), name);
            }
        }
    }

    @Test
    void numbersAreReadAsPythonsFloatReadsThem() {
        assertEquals(10.5, Bundle.pythonFloat(" 1_0.5\t"), 0.0);
        assertEquals(Double.NEGATIVE_INFINITY, Bundle.pythonFloat("-Infinity"), 0.0);
        assertTrue(Double.isNaN(Bundle.pythonFloat("NaN")));
        assertEquals(1.0, Bundle.pythonFloat("1."), 0.0);
        assertEquals(-2.5e-3, Bundle.pythonFloat("-.25E-2"), 0.0);
        for (String bad : new String[]{"1d", "0x10", "1__0", "_1", "infe5", "", ".", "1e"}) {
            assertThrows(NumberFormatException.class, () -> Bundle.pythonFloat(bad), bad);
        }
    }

    static double[][] doubleRows(JSONArray a) throws Exception {
        double[][] out = new double[a.length()][];
        for (int i = 0; i < out.length; i++) {
            out[i] = Vectors.doubles(a.getJSONArray(i));
        }
        return out;
    }

    /** The derived bundle {@code name} of the vectors: the committed bundle's files, its manifest and tables. */
    File bundle(String name) throws Exception {
        File d = new File(tmp, "bundles/" + name);
        if (d.isDirectory()) {
            return d;
        }
        assertTrue(d.mkdirs());
        JSONObject spec = dev.getJSONObject("bundles").getJSONObject(name);
        for (File f : new File(Vectors.dir(), "bundle").listFiles()) {
            BundleTest.write(new File(d, f.getName()), Bundle.readAll(f));
        }
        BundleTest.write(new File(d, Bundle.MANIFEST), spec.getString("manifest").getBytes(StandardCharsets.UTF_8));
        JSONObject files = spec.getJSONObject("files");
        for (Iterator<?> it = files.keys(); it.hasNext(); ) {
            String file = (String) it.next();
            BundleTest.write(new File(d, file), files.getString(file).getBytes(StandardCharsets.UTF_8));
        }
        assertEquals(spec.getString("sha256"), Bundle.load(d, null).sha256, name);
        return d;
    }

    Device device(String name, File bundle, int[][] withDays) throws Exception {
        Device d = new Device(new File(tmp, "devices/" + name), 1, new Random(0), DeviceMessages.Limits.DEFAULT,
                new MlpTrainer(), null, new SecureRandom());
        d.installBundle(bundle, null);
        d.addDays(withDays);
        return d;
    }

    static String answer(String name) throws Exception {
        return dev.getJSONObject("answers").getJSONObject(name).getString("reply");
    }

    byte[] request() throws Exception {
        return Vectors.hex(dev, "request");
    }

    @Test
    void onThePublicMapTheCellRequestIsAnsweredAndRefusedAsThePythonDeviceDoes() throws Exception {
        Device d = device("release", bundle("public_map"), days);
        assertEquals(answer("release"), Bytes.hex(d.handle(request())));
        assertEquals(list(dev.getJSONObject("answers").getJSONObject("release").getJSONArray("ones")),
                ones(d.pending()));
        assertEquals(dev.getInt("max_cells"), ones(d.pending()).size());
        assertTrue(d.pendingIsCells());
        // nothing but the cell release is planned under this bundle: the environment request is refused
        double[] pending = d.pending();
        byte[] initial = DeviceMessages.toBytes(new DeviceMessages.InitialStatesRequest(4));
        assertEquals(answer("environment_under_public_map"), Bytes.hex(d.handle(initial)));
        assertArrayEquals(pending, d.pending(), "a refusal leaves the pending vector as it was");
        assertTrue(d.pendingIsCells());
        // a bundle that declares no plan: no squares are marked for a run that planned no noise on them
        Device plain = device("plain", new File(Vectors.dir(), "bundle"), days);
        assertEquals(answer("no_plan"), Bytes.hex(plain.handle(request())));
        assertNull(plain.pending());
        // a plan whose budget the release would exceed
        Device tight = device("tight", bundle("tight"), days);
        assertEquals(answer("past_budget"), Bytes.hex(tight.handle(request())));
        assertNull(tight.pending());
    }

    @Test
    void onTheReleasedTableTheDaysAreReadThroughThePublicMap() throws Exception {
        Device d = device("moved", bundle("public_map"), days);
        d.installBundle(bundle("released"), null);
        assertEquals(dev.getJSONArray("released").length(), d.bundle().cells.length);
        assertEquals(answer("on_released_table"), Bytes.hex(d.handle(request())));
        JSONObject moved = dev.getJSONObject("moved");
        int[][] want = Vectors.intRows(moved.getJSONArray("days"));
        assertArrayEquals(want, d.days());
        assertEquals(moved.getInt("home"), d.home());
        // the environment contribution of the moved days and home, on the released table
        byte[] initial = DeviceMessages.toBytes(new DeviceMessages.InitialStatesRequest(4));
        assertEquals(moved.getString("environment_ack"), Bytes.hex(d.handle(initial)));
        double[] contribution = d.pending();
        assertEquals(moved.getInt("environment_length"), contribution.length);
        JSONObject nonzero = moved.getJSONObject("environment_nonzero");
        for (int i = 0; i < contribution.length; i++) {
            double x = nonzero.optDouble(String.valueOf(i), 0.0);
            assertEquals(x, contribution[i], 1e-9, "entry " + i);
        }
        // the owner's (state, action) pairs: features of the moved days, column by column
        float[][] pairs = d.positivePairs();
        double[] sums = new double[pairs[0].length];
        for (float[] row : pairs) {
            for (int j = 0; j < row.length; j++) {
                sums[j] += row[j];
            }
        }
        double[] python = Vectors.doubles(moved.getJSONArray("positive_column_sums"));
        for (int j = 0; j < sums.length; j++) {
            assertEquals(python[j], sums[j], 1e-5 * Math.max(1, Math.abs(python[j])), "column " + j);
        }
        // the app keeps recording on the public map: ids beyond the released table are stored as they are
        d.addDays(new int[][]{days[0]});
        assertEquals(days.length + 1, d.nDays());
        assertArrayEquals(want[0], d.days()[days.length]);
        assertThrows(IllegalArgumentException.class, () -> d.addDays(new int[][]{filled(4210)}));
        // back on the public map itself: the days are read as they are stored
        d.installBundle(bundle("public_map"), null);
        assertArrayEquals(days[0], d.days()[0]);
        assertArrayEquals(days[0], d.days()[days.length]);
    }

    static int[] filled(int cell) {
        int[] day = new int[DeviceMessages.SLOTS];
        java.util.Arrays.fill(day, cell);
        return day;
    }

    @Test
    void bundlesThatWouldReadTheStoredDaysWrongAreRefused() throws Exception {
        JSONObject refused = dev.getJSONObject("install_refused");
        Device d = device("map", bundle("public_map"), days);
        d.installBundle(bundle("released"), null);
        String sha = d.bundle().sha256;
        File without = bundle("released_without_map");
        BundleException err = assertThrows(BundleException.class, () -> d.installBundle(without, null));
        assertEquals(without + ": " + refused.getString("table_without_its_map"), err.getMessage());
        assertEquals(sha, d.bundle().sha256, "nothing changed");
        // days on other cells than the released table's map
        int[][] onTable = CellUniverse.onTable(days, d.bundle().table);
        Device other = device("other", without, onTable);
        File released = bundle("released");
        err = assertThrows(BundleException.class, () -> other.installBundle(released, null));
        assertEquals(released + ": " + refused.getString("released_from_another_map"), err.getMessage());
        assertEquals(Bundle.load(without, null).sha256, other.bundle().sha256);
    }

    @Test
    void theVisitedVectorIsHeldToTheCellReleaseFloorInTheSecureRound() throws Exception {
        Device d = device("secagg", bundle("public_map"), days);
        d.handle(request());
        double clip = Math.sqrt(dev.getInt("max_cells"));
        double floor = 1.2 * Accounting.gaussianSensitivity(clip, 4210);
        long[] participants = {1, 10, 13, 16, 19};
        SecAggRound below = new SecAggRound(7, participants, 4210, 3, 4, 0, 1,
                Collections.singletonMap(1L, d.identity()), "gaussian", 0.99 * floor, clip);
        SecAggException e = assertThrows(SecAggException.class, () -> d.secaggStep(below.directory, "advertise",
                below.signedConfig(), below.envelope(1)));
        assertTrue(e.getMessage().startsWith("round 7: cell-table noise multiplier 1.188 "), e.getMessage());
        SecAggRound at = new SecAggRound(8, participants, 4210, 3, 4, 0, 1,
                Collections.singletonMap(1L, d.identity()), "gaussian", floor, clip);
        assertNotNull(d.secaggStep(at.directory, "advertise", at.signedConfig(), at.envelope(1)));
        // the same round for a device without the visited vector pending: no reward release is planned
        Device idle = device("idle", bundle("public_map"), days);
        SecAggRound again = new SecAggRound(9, participants, 4210, 3, 4, 0, 1,
                Collections.singletonMap(1L, idle.identity()), "gaussian", floor, clip);
        e = assertThrows(SecAggException.class, () -> idle.secaggStep(again.directory, "advertise",
                again.signedConfig(), again.envelope(1)));
        assertEquals("round 9: the declared privacy plan plans no reward release; refusing to take part",
                e.getMessage());
    }
}
