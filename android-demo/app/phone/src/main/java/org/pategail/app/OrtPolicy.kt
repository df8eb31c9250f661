package org.pategail.app

import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import java.nio.FloatBuffer
import java.nio.LongBuffer
import org.pategail.core.Bundle
import org.pategail.core.DeviceMessages
import org.pategail.core.Features
import org.pategail.core.MessageError
import org.pategail.core.PolicyRunner

/**
 * The core's [PolicyRunner] on ONNX Runtime's inference API. A model is accepted only with the bundle's
 * policy interface (inputs cells, features, mask; outputs log_probs, logits, values) and finite
 * log-probabilities for every cell id at every slot position — the checks of the Python SDK's Device.
 */
class OrtPolicy(private val env: OrtEnvironment = OrtEnvironment.getEnvironment()) : PolicyRunner {
    private var session: OrtSession? = null

    override fun load(model: ByteArray, bundle: Bundle) {
        val options = OrtSession.SessionOptions().apply { setIntraOpNumThreads(1) }
        val candidate = try {
            env.createSession(model, options)
        } catch (e: Exception) {
            throw MessageError(DeviceMessages.INCOMPATIBLE, "not a loadable ONNX model (${e.javaClass.simpleName})")
        }
        try {
            if (candidate.inputNames != setOf(CELLS, FEATURES, MASK) || !candidate.outputNames.containsAll(OUTPUTS)) {
                throw MessageError(DeviceMessages.INCOMPATIBLE, "the model's inputs/outputs are not the bundle's policy interface")
            }
            val n = bundle.cells.size
            val slots = DeviceMessages.SLOTS
            val rows = (n + slots - 1) / slots
            val probe = Array(rows) { i -> IntArray(slots) { t -> (i * slots + t) % n } }
            val homes = IntArray(rows) { probe[it][0] }
            val logProbs = run(candidate, probe, homes, bundle)
            if (logProbs.size != rows || logProbs.any { it.size != slots || it.any { a -> a.size != 4 } }) {
                throw MessageError(DeviceMessages.INCOMPATIBLE, "log_probs of the wrong shape")
            }
            if (logProbs.any { day -> day.any { slot -> slot.any { !it.isFinite() } } }) {
                throw MessageError(DeviceMessages.NON_FINITE, "the policy gives NaN or Inf log-probabilities")
            }
        } catch (e: MessageError) {
            candidate.close()
            throw e
        } catch (e: Exception) {
            candidate.close()
            throw MessageError(DeviceMessages.INCOMPATIBLE, "the model does not run on policy inputs (${e.javaClass.simpleName})")
        }
        session?.close()
        session = candidate
    }

    override fun logProbs(cells: Array<IntArray>, homes: IntArray, bundle: Bundle): Array<Array<FloatArray>> =
        run(session ?: throw IllegalStateException("no policy loaded"), cells, homes, bundle)

    private fun run(s: OrtSession, cells: Array<IntArray>, homes: IntArray, bundle: Bundle): Array<Array<FloatArray>> {
        val n = cells.size.toLong()
        val t = cells.first().size.toLong()
        val ids = LongBuffer.allocate((n * t).toInt())
        val features = FloatBuffer.allocate((n * t * Features.N_STATE_FEATURES).toInt())
        cells.forEachIndexed { i, day ->
            day.forEach { ids.put(it.toLong()) }
            Features.stateFeatures(day, homes[i], bundle.cells, DeviceMessages.SLOTS).forEach { features.put(it) }
        }
        ids.rewind()
        features.rewind()
        val mask = Array(cells.size) { i -> Features.actionMask(cells[i], homes[i]) }
        val feeds = mapOf(
            CELLS to OnnxTensor.createTensor(env, ids, longArrayOf(n, t)),
            FEATURES to OnnxTensor.createTensor(env, features, longArrayOf(n, t, Features.N_STATE_FEATURES.toLong())),
            MASK to OnnxTensor.createTensor(env, mask),
        )
        try {
            return s.run(feeds, setOf(LOG_PROBS)).use { result ->
                @Suppress("UNCHECKED_CAST")
                result.get(0).value as Array<Array<FloatArray>>
            }
        } finally {
            feeds.values.forEach { it.close() }
        }
    }

    companion object {
        const val CELLS = "cells"
        const val FEATURES = "features"
        const val MASK = "mask"
        const val LOG_PROBS = "log_probs"
        val OUTPUTS = setOf(LOG_PROBS, "logits", "values")
    }
}
