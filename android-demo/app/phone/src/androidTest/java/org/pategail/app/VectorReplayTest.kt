package org.pategail.app

import androidx.test.ext.junit.runners.AndroidJUnit4
import androidx.test.platform.app.InstrumentationRegistry
import java.io.File
import java.math.BigInteger
import java.security.SecureRandom
import java.util.Random
import org.json.JSONArray
import org.json.JSONObject
import org.junit.Assert.assertArrayEquals
import org.junit.Assert.assertEquals
import org.junit.Assert.assertTrue
import org.junit.Assert.fail
import org.junit.BeforeClass
import org.junit.Test
import org.junit.runner.RunWith
import org.pategail.core.Bundle
import org.pategail.core.BundleException
import org.pategail.core.Device
import org.pategail.core.DeviceMessages
import org.pategail.core.secagg.Bytes
import org.pategail.core.secagg.Crypto
import org.pategail.core.secagg.Prg
import org.pategail.core.tools.ReplayTrainer

/**
 * The cross-language vectors (android-demo/vectors, packed as this test's assets) replayed on a phone:
 * BouncyCastle and the platform AES on ART give the Python SDK's bytes; the core device answers the
 * reference RoundRequest with the Python Ack; and ONNX Runtime's Android training package trains the
 * bundle's artifacts to the Python losses and runs the policy to the Python log-probabilities.
 */
@RunWith(AndroidJUnit4::class)
class VectorReplayTest {
    companion object {
        lateinit var dir: File

        @BeforeClass
        @JvmStatic
        fun copyAssets() {
            val context = InstrumentationRegistry.getInstrumentation().targetContext
            val assets = InstrumentationRegistry.getInstrumentation().context.assets
            dir = File(context.cacheDir, "vectors").apply { deleteRecursively(); mkdirs() }
            fun copy(path: String) {
                val children = assets.list(path).orEmpty()
                if (children.isEmpty()) {
                    File(dir, path).apply { parentFile?.mkdirs() }.outputStream().use { out -> assets.open(path).use { it.copyTo(out) } }
                } else {
                    children.forEach { copy(if (path.isEmpty()) it else "$path/$it") }
                }
            }
            listOf("bundle", "crypto.json", "messages.json", "features.json", "device.json", "training.json").forEach(::copy)
        }

        fun json(name: String) = JSONObject(File(dir, name).readText())
    }

    private val bundleDir get() = File(dir, "bundle")

    @Test
    fun cryptoGivesThePythonBytesOnArt() {
        val v = json("crypto.json")
        val x = v.getJSONArray("x25519").getJSONObject(0)
        assertArrayEquals(Bytes.unhex(x.getString("shared")), Crypto.agree(Bytes.unhex(x.getString("private")), Bytes.unhex(x.getString("peer_public"))))
        val e = v.getJSONArray("ed25519").getJSONObject(2)
        assertArrayEquals(Bytes.unhex(e.getString("signature")), Crypto.sign(Bytes.unhex(e.getString("private")), Bytes.unhex(e.getString("data"))))
        val m = v.getJSONArray("masks").getJSONObject(3)
        val want = m.getJSONArray("mask").let { a -> LongArray(a.length()) { BigInteger(a.getString(it)).toLong() } }
        assertArrayEquals(want, Prg.expandMask(Bytes.unhex(m.getString("seed")), m.getInt("n_data")))
    }

    @Test
    fun theBundleVerifiesAndATamperedCopyIsRefused() {
        val bundle = Bundle.load(bundleDir, OrtTrainer.ORT_VERSION)
        assertEquals(4210, bundle.cells.size)
        val copy = File(dir, "tampered").apply { deleteRecursively(); mkdirs() }
        bundleDir.listFiles()!!.forEach { it.copyTo(File(copy, it.name)) }
        File(copy, "policy.onnx").appendBytes(byteArrayOf(0))
        try {
            Bundle.load(copy, OrtTrainer.ORT_VERSION)
            fail("a tampered bundle was accepted")
        } catch (e: BundleException) {
            assertTrue(e.message!!.contains("SHA-256"))
        }
    }

    @Test
    fun theCoreDeviceAnswersThePythonRoundRequest() {
        val ref = json("device.json")
        val days = json("features.json").getJSONArray("days").let { a ->
            Array(a.length()) { i -> a.getJSONArray(i).let { r -> IntArray(r.length()) { r.getInt(it) } } }
        }
        val root = File(dir, "device").apply { deleteRecursively() }
        val device = Device(root, 1, Random(ref.getLong("seed")), DeviceMessages.Limits.DEFAULT,
            ReplayTrainer(File(dir, "device.json"), 1e-6), null, SecureRandom())
        device.installBundle(bundleDir, null)
        device.addDays(days)
        val request = Bytes.unhex(json("messages.json").getJSONObject("device").getString("round_request"))
        assertEquals(ref.getString("ack"), Bytes.hex(device.handle(request)))
    }

    private fun rows(ref: JSONObject, idx: JSONArray): Array<FloatArray> {
        val pairs = ref.getJSONArray("pairs")
        return Array(idx.length()) { i -> val r = idx.getInt(i); FloatArray(15) { j -> pairs.getDouble(15 * r + j).toFloat() } }
    }

    @Test
    fun ortTrainerReproducesThePythonLossesAndScores() {
        val ref = json("training.json")
        val bundle = Bundle.load(bundleDir, OrtTrainer.ORT_VERSION)
        val labels = ref.getJSONArray("labels")
        val trainer = OrtTrainer()
        trainer.open(bundle, null)
        val batches = ref.getJSONArray("batches")
        for (s in 0 until batches.length()) {
            val idx = batches.getJSONArray(s)
            val loss = trainer.trainStep(rows(ref, idx), FloatArray(idx.length()) { labels.getDouble(idx.getInt(it)).toFloat() })
            assertEquals("loss of step $s", ref.getJSONArray("losses").getDouble(s), loss.toDouble(), 1e-5)
        }
        val prob = trainer.score(rows(ref, ref.getJSONArray("eval_rows")))
        val want = ref.getJSONArray("eval_prob")
        prob.forEachIndexed { i, p -> assertEquals("eval prob $i", want.getDouble(i), p.toDouble(), 1e-5) }
        val ckpt = File(dir, "after.ckpt")
        trainer.saveCheckpoint(ckpt)
        OrtTrainer().apply { open(bundle, ckpt) }.score(rows(ref, ref.getJSONArray("eval_rows")))
            .forEachIndexed { i, p -> assertEquals("prob $i after a checkpoint round trip", prob[i], p, 0f) }
    }

    @Test
    fun ortPolicyGivesThePythonLogProbabilities() {
        val ref = json("training.json")
        val bundle = Bundle.load(bundleDir, OrtTrainer.ORT_VERSION)
        val policy = OrtPolicy()
        policy.load(bundle.policy.readBytes(), bundle)
        val p = ref.getJSONObject("policy_inputs")
        val n = p.getJSONArray("shape").getInt(0)
        val t = p.getJSONArray("shape").getInt(1)
        val cells = Array(n) { i -> IntArray(t) { p.getJSONArray("cells").getInt(i * t + it) } }
        val home = json("features.json").getInt("home")
        val got = policy.logProbs(cells, IntArray(n) { home }, bundle)
        val want = ref.getJSONArray("policy_log_probs")
        for (i in 0 until n) for (s in 0 until t) for (a in 0 until 4) {
            val w = want.getDouble((i * t + s) * 4 + a)
            assertEquals("log_prob [$i, $s, $a]", w, got[i][s][a].toDouble(), 1e-4 * maxOf(1.0, Math.abs(w)))
        }
    }
}
