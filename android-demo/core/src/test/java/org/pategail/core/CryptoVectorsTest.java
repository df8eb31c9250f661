package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.security.SecureRandom;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.Checksum;
import org.pategail.core.secagg.Crypto;
import org.pategail.core.secagg.FixedPoint;
import org.pategail.core.secagg.NeighbourGraph;
import org.pategail.core.secagg.Prg;
import org.pategail.core.secagg.SecAggClient;
import org.pategail.core.secagg.SecAggException;
import org.pategail.core.secagg.Shamir;

/** The secure-aggregation primitives give the Python SDK's bytes (crypto.json). */
class CryptoVectorsTest {
    static JSONObject v;

    @BeforeAll
    static void load() throws Exception {
        v = Vectors.load("crypto.json");
    }

    @Test
    void x25519AgreementAndMaskSeeds() throws Exception {
        JSONArray cases = v.getJSONArray("x25519");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            byte[] priv = Vectors.hex(c, "private");
            assertArrayEquals(Vectors.hex(c, "public"), Crypto.x25519Public(priv));
            assertArrayEquals(Vectors.hex(c, "shared"), Crypto.agree(priv, Vectors.hex(c, "peer_public")));
            byte[] digest = Vectors.hex(v, "config_digest");
            assertArrayEquals(Vectors.hex(c, "mask_seed_u5_v3"),
                    Crypto.maskSeed(priv, Vectors.hex(c, "peer_public"), digest, 5, 3));
            assertArrayEquals(Vectors.hex(c, "mask_seed_u5_v3"),
                    Crypto.maskSeed(priv, Vectors.hex(c, "peer_public"), digest, 3, 5), "s_uv = s_vu");
        }
        byte[] priv = Vectors.hex(cases.getJSONObject(0), "private");
        SecAggException e = assertThrows(SecAggException.class, () -> Crypto.agree(priv, Vectors.hex(v, "x25519_low_order")));
        assertEquals(SecAggException.Kind.MESSAGE_REJECTED, e.kind());
    }

    @Test
    void everyLowOrderX25519KeyIsRefused() throws Exception {
        // the points (and their non-canonical encodings) whose shared secret is all zero whatever the private
        // key: the Python SDK refuses each; so must agree(), for every private key
        JSONArray points = v.getJSONArray("x25519_low_order_points");
        assertTrue(points.length() >= 7, "the vectors list the low-order points");
        JSONArray cases = v.getJSONArray("x25519");
        for (int k = 0; k < cases.length(); k++) {
            byte[] priv = Vectors.hex(cases.getJSONObject(k), "private");
            for (int i = 0; i < points.length(); i++) {
                byte[] point = Bytes.unhex(points.getString(i));
                SecAggException e = assertThrows(SecAggException.class, () -> Crypto.agree(priv, point),
                        points.getString(i));
                assertEquals(SecAggException.Kind.MESSAGE_REJECTED, e.kind());
            }
        }
    }

    @Test
    void secureThresholdsAndCertificateSizes() throws Exception {
        JSONArray rows = v.getJSONArray("thresholds");
        assertTrue(rows.length() > 50);
        for (int i = 0; i < rows.length(); i++) {
            JSONObject c = rows.getJSONObject(i);
            int n = c.getInt("n"), degree = c.getInt("degree"), colluders = c.getInt("colluders");
            String where = "n=" + n + " degree=" + degree + " c=" + colluders;
            assertEquals(c.getInt("secure_threshold"), NeighbourGraph.secureThreshold(n, degree, colluders), where);
            assertEquals(c.getInt("certificate_size"), NeighbourGraph.certificateSize(n, colluders), where);
        }
        JSONArray graphs = v.getJSONArray("graph");
        for (int i = 0; i < graphs.length(); i++) {
            JSONObject c = graphs.getJSONObject(i);
            assertEquals(c.getInt("secure_threshold"), NeighbourGraph.secureThreshold(
                    c.getJSONArray("participants").length(), c.getInt("degree"), 0));
        }
    }

    @Test
    void checksumKeyCommitments() throws Exception {
        JSONArray cases = v.getJSONArray("key_commitment");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            assertArrayEquals(Vectors.hex(c, "commitment"), Checksum.keyCommitment(Vectors.hex(c, "key")));
        }
    }

    @Test
    void hkdfWithTheProjectsInfoStrings() throws Exception {
        JSONArray cases = v.getJSONArray("hkdf");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            JSONArray ctx = c.getJSONArray("context");
            long[] context = new long[ctx.length()];
            for (int j = 0; j < context.length; j++) {
                context[j] = new BigInteger(ctx.getString(j)).longValue();
            }
            byte[] salt = c.isNull("salt") ? null : Vectors.hex(c, "salt");
            assertArrayEquals(Vectors.hex(c, "key"),
                    Crypto.hkdfSalted(Vectors.hex(c, "secret"), salt, c.getString("purpose"), context),
                    c.getString("purpose"));
        }
        byte[] shared = Vectors.hex(cases.getJSONObject(0), "secret");
        byte[] digest = Vectors.hex(v, "config_digest");
        assertArrayEquals(Vectors.hex(v, "share_key_s10_r11"), Crypto.shareKey(shared, digest, 10, 11));
        assertArrayEquals(Vectors.hex(v, "envelope_key_d10"), Checksum.envelopeKey(shared, digest, 10));
        assertArrayEquals(Vectors.hex(v, "envelope_aad_d10"), Checksum.envelopeAad(digest, 10));
        JSONObject secrets = v.getJSONObject("envelope_secrets");
        Object[] unpacked = Checksum.unpackSecrets(Vectors.hex(secrets, "plain"));
        assertArrayEquals(Vectors.hex(secrets, "key"), (byte[]) unpacked[0]);
        assertEquals(Long.parseLong(secrets.getString("offset")), (long) (Long) unpacked[1]);
    }

    @Test
    void ed25519SignaturesAreByteIdentical() throws Exception {
        JSONArray cases = v.getJSONArray("ed25519");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            byte[] data = Vectors.hex(c, "data"), sig = Vectors.hex(c, "signature");
            assertArrayEquals(Vectors.hex(c, "public"), Crypto.ed25519Public(Vectors.hex(c, "private")));
            assertArrayEquals(sig, Crypto.sign(Vectors.hex(c, "private"), data));
            assertTrue(Crypto.verify(Vectors.hex(c, "public"), sig, data));
            sig[5] ^= 1;
            assertFalse(Crypto.verify(Vectors.hex(c, "public"), sig, data));
        }
    }

    @Test
    void aesGcmOpensPythonsSealAndRefusesTampering() throws Exception {
        JSONArray cases = v.getJSONArray("gcm");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            byte[] key = Vectors.hex(c, "key"), aad = Vectors.hex(c, "aad"), sealed = Vectors.hex(c, "sealed");
            assertArrayEquals(Vectors.hex(c, "plaintext"), Crypto.openSealed(key, sealed, aad));
            byte[] bad = sealed.clone();
            bad[bad.length - 1] ^= 1;
            assertThrows(SecAggException.class, () -> Crypto.openSealed(key, bad, aad));
            assertThrows(SecAggException.class, () -> Crypto.openSealed(key, sealed, Bytes.concat(aad, new byte[]{1})));
            byte[] mine = Crypto.seal(key, Vectors.hex(c, "plaintext"), aad, new SecureRandom());
            assertArrayEquals(Vectors.hex(c, "plaintext"), Crypto.openSealed(key, mine, aad));
        }
    }

    @Test
    void masksAndTheChecksumWord() throws Exception {
        JSONArray cases = v.getJSONArray("masks");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            long[] mask = Prg.expandMask(Vectors.hex(c, "seed"), c.getInt("n_data"));
            assertArrayEquals(Vectors.words(c.getJSONArray("mask")), mask);
            assertTrue(mask[mask.length - 1] >= 0 && mask[mask.length - 1] < Prg.P61);
        }
        JSONObject a = v.getJSONObject("add_mask");
        long[] acc = Vectors.words(a.getJSONArray("acc"));
        Prg.addMask(acc, Prg.expandMask(Vectors.hex(a, "plus_seed"), 5), +1);
        assertArrayEquals(Vectors.words(a.getJSONArray("after_plus")), acc);
        Prg.addMask(acc, Prg.expandMask(Vectors.hex(a, "minus_seed"), 5), -1);
        assertArrayEquals(Vectors.words(a.getJSONArray("after_minus")), acc);
    }

    @Test
    void checksumWeightsAndValues() throws Exception {
        JSONArray cases = v.getJSONArray("checksum");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            long[] w = Checksum.weights(Vectors.hex(c, "key"), c.getJSONArray("weights").length());
            assertArrayEquals(Vectors.words(c.getJSONArray("weights")), w);
            long[] values = Vectors.words(c.getJSONArray("values"));
            assertEquals(Long.parseLong(c.getString("checksum")),
                    Checksum.checksum(values, w, Long.parseLong(c.getString("offset"))));
        }
    }

    @Test
    void shamirReconstructsPythonsSharesFromEverySubset() throws Exception {
        JSONArray cases = v.getJSONArray("shamir");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            int t = c.getInt("threshold");
            int[] xs = Vectors.ints(c.getJSONArray("xs"));
            JSONArray ys = c.getJSONArray("ys");
            for (int mask = 0; mask < (1 << xs.length); mask++) {
                if (Integer.bitCount(mask) != t) {
                    continue;
                }
                Map<Integer, BigInteger> shares = new HashMap<>();
                for (int j = 0; j < xs.length; j++) {
                    if ((mask & (1 << j)) != 0) {
                        shares.put(xs[j], Shamir.yFromBytes(Bytes.unhex(ys.getString(j))));
                    }
                }
                assertArrayEquals(Vectors.hex(c, "secret"), Shamir.reconstruct(shares, t));
            }
            // and Java's own shares reconstruct to the secret, while t - 1 of them do not
            BigInteger[] mine = Shamir.split(Vectors.hex(c, "secret"), xs, t, new SecureRandom());
            Map<Integer, BigInteger> some = new HashMap<>();
            for (int j = 0; j < t; j++) {
                some.put(xs[xs.length - 1 - j], mine[xs.length - 1 - j]);
            }
            assertArrayEquals(Vectors.hex(c, "secret"), Shamir.reconstruct(some, t));
            assertEquals(mine[0], Shamir.yFromBytes(Shamir.yToBytes(mine[0])));
            if (t > 1) {
                some.remove(xs[xs.length - 1]);
                Map<Integer, BigInteger> fewer = some;
                assertThrows(IllegalArgumentException.class, () -> Shamir.reconstruct(fewer, t));
            }
        }
        byte[] outside = Shamir.yToBytes(Shamir.PRIME.subtract(BigInteger.ONE));
        outside[32] = (byte) 0xFF;
        assertThrows(IllegalArgumentException.class, () -> Shamir.yFromBytes(outside));
    }

    @Test
    void fixedPointRoundsHalfToEven() throws Exception {
        JSONObject c = v.getJSONObject("fixed_point");
        assertArrayEquals(Vectors.longs(c.getJSONArray("encoded")), FixedPoint.encode(Vectors.doubles(c.getJSONArray("values"))));
        assertThrows(IllegalArgumentException.class, () -> FixedPoint.encode(new double[]{Double.NaN}));
    }

    @Test
    void neighbourGraphs() throws Exception {
        JSONArray cases = v.getJSONArray("graph");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            long[] participants = Vectors.longs(c.getJSONArray("participants"));
            NeighbourGraph g = new NeighbourGraph(participants, Vectors.hex(c, "round_seed"), c.getInt("degree"));
            JSONObject nb = c.getJSONObject("neighbours");
            for (long d : participants) {
                Set<Long> want = new TreeSet<>();
                for (long x : Vectors.longs(nb.getJSONArray(String.valueOf(d)))) {
                    want.add(x);
                }
                assertEquals(want, g.neighbours(d), "neighbours of " + d);
            }
        }
    }

    @Test
    void survivorDigestAndSumBound() throws Exception {
        JSONArray cases = v.getJSONArray("survivor_digest");
        for (int i = 0; i < cases.length(); i++) {
            JSONObject c = cases.getJSONObject(i);
            assertArrayEquals(Vectors.hex(c, "digest"),
                    SecAggClient.survivorDigest(Vectors.hex(c, "config_digest"), Vectors.hex(c, "bitmap")));
        }
        JSONArray bounds = v.getJSONArray("sum_bound");
        for (int i = 0; i < bounds.length(); i++) {
            JSONObject c = bounds.getJSONObject(i);
            double want = c.getDouble("bound");
            double got = FixedPoint.sumBound(c.getInt("n"), c.getDouble("scale_quanta"), c.getInt("n_min"), 64.0);
            assertEquals(want, got, Math.abs(want) * 1e-12);
        }
    }
}
