package org.pategail.core.secagg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.pategail.core.Vectors;

/**
 * The PLD accountant against closed forms (a single Laplace mechanism's δ(ε) and ε(δ)) and against dp-accounting
 * as the Python SDK runs it (pld.json: single Laplace distributions, Laplace-only compositions up to a real
 * plan's 279,164 queries).
 */
class PldTest {
    static final double INTERVAL = PrivacyLedger.LEDGER_INTERVAL;

    static JSONObject vectors() throws Exception {
        return Vectors.load("pld.json");
    }

    @Test
    void laplaceDeltaIsTheClosedForm() {
        // Laplace mechanism of scale b, sensitivity 1: δ(ε) = 1 - e^{(ε - 1/b)/2} for |ε| ≤ 1/b, 0 above
        for (double b : new double[]{0.5, 1.0, 3.3, 20.0}) {
            for (double f : new double[]{-0.9, -0.2, 0.0, 0.3, 0.77, 0.999}) {
                double eps = f / b;
                assertEquals(-Math.expm1((eps - 1 / b) / 2), Pld.laplaceDelta(eps, b), 1e-13, b + " at " + eps);
            }
            assertEquals(0.0, Pld.laplaceDelta(1.01 / b, b));
            assertEquals(-Math.expm1(-1.5 / b), Pld.laplaceDelta(-1.5 / b, b), 1e-13);     // x = ∞: 1 - e^ε
        }
    }

    @Test
    void connectTheDotsIsExactOnItsGridAndPessimisticBetween() {
        for (double b : new double[]{1.0, 3.3}) {
            Pld pld = Pld.laplace(b, INTERVAL);
            double mass = pld.infinity;
            for (double p : pld.probs) {
                assertTrue(p >= 0);
                mass += p;
            }
            assertEquals(1.0, mass, 1e-12);
            for (long i = pld.lower; i < pld.lower + pld.size(); i += 97) {
                double eps = i * INTERVAL;
                if (eps < 0) {
                    continue;
                }
                double exact = -Math.expm1((Math.min(eps, 1 / b) - 1 / b) / 2);
                assertEquals(exact, pld.deltaForEpsilon(eps), 1e-12, "on the grid at " + eps);
                double between = eps + INTERVAL / 2;
                double exactBetween = between >= 1 / b ? 0 : -Math.expm1((between - 1 / b) / 2);
                assertTrue(pld.deltaForEpsilon(between) >= exactBetween - 1e-15, "pessimistic at " + between);
            }
            // ε(δ): the true 1/b + 2 ln(1 - δ), from above by less than one grid step
            for (double delta : new double[]{1e-5, 1e-3, 0.1}) {
                double exact = 1 / b + 2 * Math.log1p(-delta);
                double got = pld.epsilonForDelta(delta);
                assertTrue(got >= exact - 1e-12 && got <= exact + INTERVAL, b + " at δ " + delta + ": " + got);
            }
        }
    }

    @Test
    void selfCompositionByFftEqualsRepeatedConvolution() {
        Pld one = Pld.laplace(2.0, INTERVAL);           // 3,335 points: dense
        Pld byFft = one.selfCompose(5);
        Pld direct = one;
        for (int i = 1; i < 5; i++) {
            direct = direct.compose(one, 0);
        }
        for (long loss = byFft.lower; loss < byFft.lower + byFft.size(); loss += 101) {
            double a = byFft.probs[(int) (loss - byFft.lower)];
            double b = direct.probs[(int) (loss - direct.lower)];
            assertEquals(b, a, 1e-15, "loss " + loss);
        }
        assertEquals(direct.epsilonForDelta(1e-5), byFft.epsilonForDelta(1e-5), 1e-9);
        // above 100 the power goes through exp(n log z): the same as 99 + 1 composed directly
        Pld small = Pld.laplace(40.0, INTERVAL);
        Pld hundred = small.selfCompose(100);
        Pld split = small.selfCompose(99).compose(small);
        assertEquals(split.epsilonForDelta(1e-5), hundred.epsilonForDelta(1e-5), 1e-9);
        assertEquals(split.deltaForEpsilon(0.1), hundred.deltaForEpsilon(0.1), 1e-13);
    }

    @Test
    void singleLaplaceDistributionsAreDpAccountings() throws Exception {
        JSONArray cases = vectors().getJSONArray("laplace");
        assertEquals(10, cases.length());
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            double b = c.getDouble("scale");
            Pld pld = Pld.laplace(b, c.getDouble("interval"));
            String name = "b " + b + " at " + c.getDouble("interval");
            assertEquals(c.getBoolean("sparse"), pld.sparse, name);
            assertEquals(c.getLong("lower"), pld.lower, name);
            assertEquals(c.getInt("size"), pld.size(), name);
            assertEquals(c.getDouble("infinity"), pld.infinity, 1e-15, name);
            double sum = 0;
            for (double p : pld.probs) {
                sum += p;
            }
            assertEquals(c.getDouble("sum"), sum, 1e-12, name);
            JSONArray picks = c.getJSONArray("picks");
            for (int k = 0; k < picks.length(); k++) {
                int idx = picks.getJSONArray(k).getInt(0);
                double want = picks.getJSONArray(k).getDouble(1);
                // δ(ε) agrees to an ulp or two (the JVM's exp and log against glibc's); a probability is a second
                // difference of δ over expm1(interval), so up to a few ulp / interval apart
                assertEquals(want, pld.probs[idx], 1e-15 / c.getDouble("interval"), name + " [" + idx + "]");
            }
            JSONArray de = c.getJSONArray("delta_for_epsilon");
            for (int k = 0; k < de.length(); k++) {
                double want = de.getJSONArray(k).getDouble(1);
                assertEquals(want, pld.deltaForEpsilon(de.getJSONArray(k).getDouble(0)), 1e-9 * want + 1e-15, name);
            }
            JSONArray ed = c.getJSONArray("epsilon_for_delta");
            for (int k = 0; k < ed.length(); k++) {
                double want = ed.getJSONArray(k).getDouble(1);
                assertEquals(want, pld.epsilonForDelta(ed.getJSONArray(k).getDouble(0)), 1e-9 * want, name);
            }
        }
    }

    /**
     * The tolerance on a figure of the SDK's: 1e-9 relative, or 4× dp-accounting's own spread where that is larger
     * (how far its figure moves with its FFTs at power-of-two lengths, or with the C library's exp and log in place
     * of numpy's AVX-512 ones, i.e. on another CPU).
     */
    static double tolerance(double sdk, double powerOfTwo, double libm) {
        return Math.max(1e-9 * Math.abs(sdk), 4 * Math.max(Math.abs(powerOfTwo - sdk), Math.abs(libm - sdk)));
    }

    /**
     * Each composition's ε (two δ) and δ (two ε) are the SDK's to 1e-9 relative, except where dp-accounting's own
     * figure moves by more than that with nothing but the rounding of its FFT (the vectors hold its figure with
     * every FFT at a power-of-two length, as here, and with the C library's exp and log in the Laplace mechanism's
     * δ(ε), as numpy computes them on a CPU without AVX-512F): there within 4× that spread. Its mass at +∞ is the
     * SDK's; its support may differ where the tails of mass ≤ 0.5e-15 are cut (that depends on the FFT's rounding noise).
     */
    @Test
    void compositionsGiveThePythonSdksEpsilon() throws Exception {
        JSONObject v = vectors();
        assertEquals(v.getDouble("interval"), INTERVAL, 0.0);
        JSONArray cases = v.getJSONArray("compositions");
        assertTrue(cases.length() >= 15);
        List<String> failures = new java.util.ArrayList<>();
        int strict = 0;
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            String name = c.getString("name");
            List<Accounting.Release> releases = PrivacyLedgerTest.releases(c.getJSONArray("releases"));
            long t0 = System.nanoTime();
            Pld pld = Accounting.composedPld(releases, INTERVAL);
            double ms = (System.nanoTime() - t0) / 1e6;
            assertEquals(c.getDouble("infinity"), pld.infinity, 1e-15, name);
            System.out.printf("PLD %s: %d points (SDK %d), composed in %.0f ms%n", name, pld.size(), c.getInt("size"),
                    ms);
            JSONObject eps = c.getJSONObject("epsilon");
            JSONObject pow2 = c.getJSONObject("epsilon_power_of_two_fft");
            JSONObject libm = c.getJSONObject("epsilon_libm");
            for (String delta : new String[]{"1e-05", "1e-07"}) {
                double want = eps.getDouble(delta), same = pow2.getDouble(delta), lm = libm.getDouble(delta);
                double got = pld.epsilonForDelta(Double.parseDouble(delta));
                System.out.printf("  ε at δ %s: %.15g, SDK %.15g: relative difference %.1e (dp-accounting's own "
                        + "spread: FFT length %.1e, exp/log %.1e)%n", delta, got, want, Math.abs(got - want) / want,
                        Math.abs(same - want) / want, Math.abs(lm - want) / want);
                if (Math.abs(got - want) > tolerance(want, same, lm)) {
                    failures.add(name + " ε at δ " + delta + ": " + got + " != " + want);
                }
                strict += Math.abs(got - want) <= 1e-9 * want ? 1 : 0;
                assertEquals(got, Accounting.composedEpsilon(releases, Double.parseDouble(delta), INTERVAL), 0.0);
            }
            JSONArray deltas = c.getJSONArray("delta");
            for (int k = 0; k < deltas.length(); k++) {
                JSONArray d = deltas.getJSONArray(k);
                double want = d.getDouble(1), same = d.getDouble(2), lm = d.getDouble(3);
                double got = pld.deltaForEpsilon(d.getDouble(0));
                System.out.printf("  δ at ε %.6g: %.15g, SDK %.15g: relative difference %.1e (spread %.1e, %.1e)%n",
                        d.getDouble(0), got, want, Math.abs(got - want) / want, Math.abs(same - want) / want,
                        Math.abs(lm - want) / want);
                if (Math.abs(got - want) > tolerance(want, same, lm)) {
                    failures.add(name + " δ at ε " + d.getDouble(0) + ": " + got + " != " + want);
                }
            }
        }
        assertEquals(List.of(), failures);
        assertTrue(strict >= 2 * cases.length() - 8, strict + " of the ε within 1e-9");
    }
}
