package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/** Fixes to days: nearest cell, modal cell per slot with its tie rules, sparse days dropped, gaps filled. */
class DayBuilderTest {
    static final double[][] CELLS = {{39.90, 116.40}, {39.95, 116.30}, {40.00, 116.50}, {39.80, 116.45}};
    static final long DAY0 = 1_700_000_000L / 86400 * 86400;   // a UTC midnight

    List<long[]> t = new ArrayList<>();
    List<double[]> p = new ArrayList<>();

    void fix(long day, int slot, int minute, int cell, double jitter) {
        t.add(new long[]{DAY0 + day * 86400 + slot * 1800L + minute * 60L});
        p.add(new double[]{CELLS[cell][0] + jitter, CELLS[cell][1] - jitter});
    }

    int[][] build(int minObserved, double offset) {
        long[] time = new long[t.size()];
        double[] lat = new double[t.size()], lon = new double[t.size()];
        for (int i = 0; i < time.length; i++) {
            time[i] = t.get(i)[0];
            lat[i] = p.get(i)[0];
            lon[i] = p.get(i)[1];
        }
        return DayBuilder.fixesToDays(time, lat, lon, CELLS, offset, minObserved);
    }

    @Test
    void modalCellTiesAndGapFilling() {
        fix(0, 3, 1, 1, 0.001);     // slot 3: cell 1 once, cell 2 twice -> 2
        fix(0, 3, 2, 2, -0.002);
        fix(0, 3, 9, 2, 0.0);
        fix(0, 10, 20, 3, 0.0);     // slot 10: cells 3 and 0 once each; 0 came first -> 0
        fix(0, 10, 5, 0, 0.0);
        fix(0, 40, 0, 3, 0.0);
        int[][] days = build(3, 0.0);
        assertEquals(1, days.length);
        int[] want = new int[48];
        for (int s = 0; s < 48; s++) {
            want[s] = s < 10 ? 2 : s < 40 ? 0 : 3;        // leading slots back-filled, the rest forward
        }
        assertArrayEquals(want, days[0]);
    }

    @Test
    void sparseDaysAreDroppedAndDaysComeInOrder() {
        fix(2, 0, 0, 1, 0.0);
        fix(2, 1, 0, 1, 0.0);
        fix(0, 5, 0, 3, 0.0);       // one observed slot: dropped at minObserved = 2
        fix(1, 7, 0, 0, 0.0);
        fix(1, 8, 0, 2, 0.0);
        int[][] days = build(2, 0.0);
        assertEquals(2, days.length);
        assertEquals(0, days[0][0]);
        assertEquals(1, days[1][0]);
        assertEquals(3, build(1, 0.0).length);
    }

    @Test
    void theUtcOffsetMovesFixesToTheirLocalDayAndSlot() {
        fix(0, 47, 10, 1, 0.0);     // 23:40 UTC = 07:40 the next day at UTC+8 -> slot 15
        int[][] days = build(1, 8.0);
        assertEquals(1, days.length);
        assertEquals(1, days[0][15]);
        assertThrows(IllegalArgumentException.class, () -> DayBuilder.fixesToDays(new long[]{0}, new double[]{91},
                new double[]{0}, CELLS, 0, 1));
    }
}
