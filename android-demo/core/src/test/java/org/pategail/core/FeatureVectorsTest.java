package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.File;

import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** State and pair features of real days, and the environment contributions, agree with the Python SDK. */
class FeatureVectorsTest {
    static JSONObject v;
    static Bundle bundle;
    static int[][] days;
    static int home;

    @BeforeAll
    static void load() throws Exception {
        v = Vectors.load("features.json");
        bundle = Bundle.load(new File(Vectors.dir(), "bundle"), "1.19.2");
        days = Vectors.intRows(v.getJSONArray("days"));
        home = v.getInt("home");
    }

    static void assertRowsClose(JSONArray want, float[][] got, double tol, String what) throws Exception {
        assertEquals(want.length(), got.length, what);
        for (int t = 0; t < got.length; t++) {
            JSONArray row = want.getJSONArray(t);
            assertEquals(row.length(), got[t].length, what);
            for (int j = 0; j < got[t].length; j++) {
                assertEquals(row.getDouble(j), got[t][j], tol, what + ": slot " + t + ", feature " + j);
            }
        }
    }

    @Test
    void homeAndLabels() throws Exception {
        assertEquals(home, Features.inferHome(days, 12));
        JSONArray labels = v.getJSONArray("labels");
        for (int i = 0; i < days.length; i++) {
            JSONArray want = labels.getJSONArray(i);
            byte[] got = Features.labelActions(days[i], home);
            for (int t = 0; t < got.length; t++) {
                assertEquals(want.getInt(t), got[t], "day " + i + ", slot " + t);
            }
        }
    }

    @Test
    void stateAndPairFeaturesWithin1e6() throws Exception {
        for (int i = 0; i < days.length; i++) {
            assertRowsClose(v.getJSONArray("state_features").getJSONArray(i),
                    Features.stateFeatures(days[i], home, bundle.cells, 48), 1e-6, "state, day " + i);
            byte[] labels = Features.labelActions(days[i], home);
            assertRowsClose(v.getJSONArray("pair_features").getJSONArray(i),
                    Features.pairFeatures(days[i], home, labels, bundle.cells), 1e-6, "pair, day " + i);
        }
    }

    @Test
    void prefixesAreCausal() throws Exception {
        int rows = v.getInt("prefix_rows");
        for (int i = 0; i < days.length; i++) {
            assertRowsClose(v.getJSONArray("prefix_state_features").getJSONArray(i),
                    Features.stateFeatures(java.util.Arrays.copyOf(days[i], rows), home, bundle.cells, 48), 1e-6,
                    "prefix, day " + i);
        }
    }

    @Test
    void actionMask() throws Exception {
        for (int i = 0; i < days.length; i++) {
            JSONArray want = v.getJSONArray("action_mask").getJSONArray(i);
            boolean[][] got = Features.actionMask(days[i], home);
            for (int t = 0; t < got.length; t++) {
                for (int a = 0; a < 4; a++) {
                    assertEquals(want.getJSONArray(t).getInt(a) == 1, got[t][a], "day " + i + " slot " + t + " action " + a);
                }
            }
        }
    }

    @Test
    void environmentContributions() throws Exception {
        // the bundle's cap (absent: DAYS_CAP), and the larger cap of a run without privacy
        initialStatesAre(v.getJSONObject("initial_state_contribution_nonzero"), bundle.initialStatesDaysCap);
        initialStatesAre(v.getJSONObject("initial_state_contribution_days_cap_1000_nonzero"), 1000);
        double[] want = Vectors.doubles(v.getJSONArray("explore_law_contribution"));
        double[] got = Contributions.exploreLaw(days, home, bundle.cells, bundle.alpha, bundle.candidates);
        assertArrayEquals(want, got, 1e-9);
        // the action-rate part: the same float64 operations in the same order, so the same bits
        double[] rates = Contributions.actionRates(days, home);
        assertArrayEquals(Vectors.doubles(v.getJSONArray("action_rate_contribution")), rates, 0.0);
        double sum = 0;
        for (double x : rates) {
            sum += x;
        }
        assertEquals(Math.min(1.0, days.length / (double) Contributions.DAYS_CAP), sum, 1e-12);
    }

    private void initialStatesAre(JSONObject nonzeroEntries, int daysCap) throws Exception {
        double[] init = Contributions.initialStates(days, home, bundle.cells.length, daysCap);
        int nonzero = 0;
        for (int i = 0; i < init.length; i++) {
            if (init[i] != 0) {
                nonzero++;
                assertEquals(nonzeroEntries.getDouble(String.valueOf(i)), init[i], 1e-12, "entry " + i);
            }
        }
        assertEquals(nonzeroEntries.length(), nonzero);
    }
}
