package org.pategail.app

import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import ai.onnxruntime.OrtTrainingSession
import java.io.File
import java.nio.FloatBuffer
import org.pategail.core.Bundle
import org.pategail.core.Trainer

/**
 * The core's [Trainer] on ONNX Runtime's Android training package (onnxruntime-training-android 1.19.2):
 * the bundle's training, eval and optimizer models, AdamW as baked into the optimizer model, one intra-op
 * thread (a phone app should not take every core; on a model this size more threads are slower).
 */
class OrtTrainer(private val env: OrtEnvironment = OrtEnvironment.getEnvironment()) : Trainer {
    private var session: OrtTrainingSession? = null

    /** The ONNX Runtime version this app is built with (pinned in phone/build.gradle.kts). */
    override fun runtimeVersion(): String = ORT_VERSION

    override fun open(bundle: Bundle, checkpoint: File?) {
        session?.close()
        val options = OrtSession.SessionOptions().apply {
            setIntraOpNumThreads(1)
            setInterOpNumThreads(1)
        }
        session = env.createTrainingSession(
            (checkpoint ?: bundle.checkpoint).absolutePath,
            bundle.training.absolutePath,
            bundle.eval.absolutePath,
            bundle.optimizer.absolutePath,
            options,
        ).also { it.setLearningRate(bundle.learningRate.toFloat()) }
    }

    private fun require(): OrtTrainingSession =
        session ?: throw IllegalStateException("no training session: open() a bundle first")

    private fun inputs(pairs: Array<FloatArray>, labels: FloatArray): Map<String, OnnxTensor> {
        val width = pairs.firstOrNull()?.size ?: 0
        val flat = FloatBuffer.allocate(pairs.size * width)
        pairs.forEach { flat.put(it) }
        flat.rewind()
        return mapOf(
            "pairs" to OnnxTensor.createTensor(env, flat, longArrayOf(pairs.size.toLong(), width.toLong())),
            "labels" to OnnxTensor.createTensor(env, FloatBuffer.wrap(labels), longArrayOf(labels.size.toLong())),
        )
    }

    override fun trainStep(pairs: Array<FloatArray>, labels: FloatArray): Float = require().step(inputs(pairs, labels))

    override fun score(pairs: Array<FloatArray>): FloatArray {
        val feeds = inputs(pairs, FloatArray(pairs.size))     // the eval model's labels are unused for scores
        try {
            return require().evalStep(feeds).use { result ->
                val prob = (result.get(2) as OnnxTensor).floatBuffer       // outputs: loss, logit, prob
                FloatArray(prob.remaining()).also { prob.get(it) }
            }
        } finally {
            feeds.values.forEach { it.close() }
        }
    }

    override fun saveCheckpoint(path: File) {
        require().saveCheckpoint(path.toPath(), true)
    }

    companion object {
        const val ORT_VERSION = "1.19.2"
    }
}

/** One optimizer step on [feeds] (closed afterwards): the training model's first output (the loss) before it. */
internal fun OrtTrainingSession.step(feeds: Map<String, OnnxTensor>): Float {
    try {
        val loss = trainStep(feeds).use { (it.get(0) as OnnxTensor).floatBuffer.get(0) }
        optimizerStep()
        lazyResetGrad()
        return loss
    } finally {
        feeds.values.forEach { it.close() }
    }
}
