package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;

import org.json.JSONObject;
import org.junit.jupiter.api.Test;

/**
 * The regions of the bundle's cell table, cell for cell the Python SDK's, and the environment vector of a
 * Gaussian run — with the region sums — entry for entry (gaussian.json, "regions"; the first user's days).
 */
class RegionsTest {
    @Test
    void regionMapsAreThePythonSdks() throws Exception {
        JSONObject maps = Vectors.load("gaussian.json").getJSONObject("regions").getJSONObject("maps");
        Bundle bundle = Bundle.load(new File(Vectors.dir(), "bundle"), "1.19.2");
        for (String k : new String[]{"64", "16", "5", "1"}) {
            int[] want = Vectors.ints(maps.getJSONArray(k));
            int[] got = Regions.regionMap(bundle.cells, Integer.parseInt(k));
            assertArrayEquals(want, got, "regions of at most " + k + " cells");
            int[] sizes = new int[Regions.count(got)];
            for (int r : got) {
                sizes[r]++;
            }
            for (int s : sizes) {
                assertTrue(s >= 1, "every region holds a cell");
            }
        }
        assertEquals(bundle.cells.length, Regions.count(Regions.regionMap(bundle.cells, 1)));
        assertThrows(IllegalArgumentException.class, () -> Regions.regionMap(bundle.cells, 0));
    }

    @Test
    void theEnvironmentVectorWithRegionSumsIsThePythonDevices() throws Exception {
        JSONObject v = Vectors.load("gaussian.json").getJSONObject("regions");
        int[][] days = Vectors.intRows(Vectors.load("features.json").getJSONArray("days"));
        Bundle bundle = Bundle.load(new File(Vectors.dir(), "bundle"), "1.19.2");
        int home = Features.inferHome(days, 12);
        assertEquals(v.getInt("home"), home);
        double[] got = Contributions.environment(days, home, bundle.cells, bundle.alpha, bundle.candidates,
                v.getInt("region_cells"), bundle.actionRates, bundle.initialStatesDaysCap);
        assertArrayEquals(Vectors.doubles(v.getJSONArray("environment_vector")), got, 1e-9);
        // each coarse row sums what its fine part sums
        int n = bundle.cells.length;
        int regions = Regions.count(Regions.regionMap(bundle.cells, v.getInt("region_cells")));
        double[] fine = Contributions.environment(days, home, bundle.cells, bundle.alpha, bundle.candidates, 0,
                false, Contributions.DAYS_CAP);
        int coarseAt = fine.length;
        double homes = 0, coarseHomes = 0;
        for (int c = 0; c < n; c++) {
            homes += fine[c];
        }
        for (int r = 0; r < regions; r++) {
            coarseHomes += got[coarseAt + r];
        }
        assertEquals(homes, coarseHomes, 1e-12);
    }
}
