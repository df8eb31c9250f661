package org.pategail.core;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

/**
 * Regions of a cell table (the Python SDK's {@code pategail.sdk.regions}): a quadtree over the cells' public
 * coordinates, and the partition of the table into the highest quadtree nodes of at most {@code maxCells}
 * cells. Both sides build them from the bundle's cell table alone, so device and coordinator agree without a
 * message. The environment vector of a Gaussian run adds the home, first-cell and visit parts summed over these
 * regions ({@link Contributions#coarse}).
 */
public final class Regions {
    private Regions() {
    }

    /** One quadtree node: its cells, and its children (empty for a leaf). */
    private static final class Node {
        final int[] cells;
        final List<Integer> children = new ArrayList<>();

        Node(int[] cells) {
            this.cells = cells;
        }
    }

    /** A box still to split: its cells, centre, half side and parent node (-1 for the root). */
    private static final class Box {
        final int[] idx;
        final double cx, cy, half;
        final int parent;

        Box(int[] idx, double cx, double cy, double half, int parent) {
            this.idx = idx;
            this.cx = cx;
            this.cy = cy;
            this.half = half;
            this.parent = parent;
        }
    }

    /**
     * The quadtree of the cells ({lat, lon} rows): a square box around them (square in kilometres: longitude
     * scaled by the cosine of the mean latitude) split into its non-empty quadrants, recursively, in the Python
     * SDK's order (a stack, quadrants pushed west-south, west-north, east-south, east-north).
     */
    private static List<Node> tree(double[][] cells) {
        int n = cells.length;
        double[] y = new double[n], x = new double[n];
        for (int i = 0; i < n; i++) {
            y[i] = cells[i][0];
        }
        double c = Math.cos(Math.toRadians(pairwiseSum(y, 0, n) / n));
        for (int i = 0; i < n; i++) {
            x[i] = cells[i][1] * c;
        }
        int[] all = new int[n];
        for (int i = 0; i < n; i++) {
            all[i] = i;
        }
        double half = Math.max(ptp(x, all), ptp(y, all)) / 2;
        if (half == 0) {
            half = 1.0;
        }
        List<Node> nodes = new ArrayList<>();
        Deque<Box> stack = new ArrayDeque<>();
        stack.push(new Box(all, min(x, all) + half, min(y, all) + half, half, -1));
        while (!stack.isEmpty()) {
            Box b = stack.pop();
            int node = nodes.size();
            nodes.add(new Node(b.idx));
            if (b.parent >= 0) {
                nodes.get(b.parent).children.add(node);
            }
            if (b.idx.length < 2 || (ptp(x, b.idx) == 0 && ptp(y, b.idx) == 0)) {
                continue;
            }
            double q = b.half / 2;
            for (boolean east : new boolean[]{false, true}) {
                for (boolean north : new boolean[]{false, true}) {
                    int count = 0;
                    int[] sub = new int[b.idx.length];
                    for (int i : b.idx) {
                        if ((x[i] >= b.cx) == east && (y[i] >= b.cy) == north) {
                            sub[count++] = i;
                        }
                    }
                    if (count > 0) {
                        stack.push(new Box(java.util.Arrays.copyOf(sub, count), b.cx + (east ? q : -q),
                                b.cy + (north ? q : -q), q, node));
                    }
                }
            }
        }
        return nodes;
    }

    /**
     * The region of every cell of the table ({lat, lon} rows): the partition into the highest quadtree nodes of
     * at most {@code maxCells} cells (a leaf of more cells at one point is its own region), numbered depth first.
     */
    public static int[] regionMap(double[][] cells, int maxCells) {
        if (maxCells < 1) {
            throw new IllegalArgumentException("a region holds at least one cell");
        }
        if (cells.length == 0) {
            throw new IllegalArgumentException("need one latitude and one longitude per cell");
        }
        List<Node> nodes = tree(cells);
        int[] out = new int[cells.length];
        Deque<Integer> stack = new ArrayDeque<>();
        stack.push(0);
        int n = 0;
        while (!stack.isEmpty()) {
            Node node = nodes.get(stack.pop());
            if (node.cells.length <= maxCells || node.children.isEmpty()) {
                for (int i : node.cells) {
                    out[i] = n;
                }
                n++;
            } else {
                for (int k = node.children.size() - 1; k >= 0; k--) {     // pushed in reverse: popped in order
                    stack.push(node.children.get(k));
                }
            }
        }
        return out;
    }

    /** Regions of a map: its largest region id plus one. */
    public static int count(int[] regionOf) {
        int max = -1;
        for (int r : regionOf) {
            max = Math.max(max, r);
        }
        return max + 1;
    }

    private static double ptp(double[] v, int[] idx) {
        double lo = Double.POSITIVE_INFINITY, hi = Double.NEGATIVE_INFINITY;
        for (int i : idx) {
            lo = Math.min(lo, v[i]);
            hi = Math.max(hi, v[i]);
        }
        return hi - lo;
    }

    private static double min(double[] v, int[] idx) {
        double lo = Double.POSITIVE_INFINITY;
        for (int i : idx) {
            lo = Math.min(lo, v[i]);
        }
        return lo;
    }

    /** numpy's pairwise summation of v[from, from + n) (its float64 {@code sum}, hence {@code mean}), so the
     * mean latitude — and the boxes built from it — is the Python SDK's to the last bit. */
    static double pairwiseSum(double[] v, int from, int n) {
        if (n < 8) {
            double res = 0.0;       // numpy starts from -0.0; the same for any sum that is not all -0.0
            for (int i = 0; i < n; i++) {
                res += v[from + i];
            }
            return res;
        }
        if (n <= 128) {
            double[] r = new double[8];
            for (int k = 0; k < 8; k++) {
                r[k] = v[from + k];
            }
            int i;
            for (i = 8; i < n - (n % 8); i += 8) {
                for (int k = 0; k < 8; k++) {
                    r[k] += v[from + i + k];
                }
            }
            double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
            for (; i < n; i++) {
                res += v[from + i];
            }
            return res;
        }
        int n2 = n / 2;
        n2 -= n2 % 8;
        return pairwiseSum(v, from, n2) + pairwiseSum(v, from + n2, n - n2);
    }
}
