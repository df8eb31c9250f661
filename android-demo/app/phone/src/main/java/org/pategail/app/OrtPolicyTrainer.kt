package org.pategail.app

import ai.onnxruntime.OnnxJavaType
import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtException
import ai.onnxruntime.OrtSession
import ai.onnxruntime.OrtTrainingSession
import java.io.File
import java.io.IOException
import java.nio.ByteBuffer
import java.nio.FloatBuffer
import java.nio.LongBuffer
import org.pategail.core.Bundle
import org.pategail.core.FedAvgRound
import org.pategail.core.PolicyTrainer

/**
 * The core's [PolicyTrainer] on ONNX Runtime's Android training package (onnxruntime-training-android 1.19.2):
 * a session on the bundle's policy training, eval and optimizer models (SGD as AdamW: its learning rate is the
 * SGD rate times the bundle's learningRateScale), opened on the checkpoint file the core wrote the round's global
 * parameters into, and saved to the file the core reads the trained ones from (the Java API has no call that
 * reads or sets a session's parameters). One intra-op thread, as [OrtTrainer].
 * ONNX Runtime's errors reach the core as IOExceptions, which the device answers as "incompatible".
 */
class OrtPolicyTrainer(private val env: OrtEnvironment = OrtEnvironment.getEnvironment()) : PolicyTrainer {
    private var session: OrtTrainingSession? = null
    private var learningRateScale = 1.0

    private inline fun <T> ort(what: String, block: () -> T): T =
        try {
            block()
        } catch (err: OrtException) {
            throw IOException("ONNX Runtime could not $what: ${err.message}", err)
        }

    override fun open(bundle: Bundle, checkpoint: File) {
        close()
        val spec = bundle.policyTraining ?: throw IOException("the bundle has no policy training artifacts")
        learningRateScale = spec.learningRateScale
        session = ort("open the policy's training session") {
            OrtSession.SessionOptions().use { options ->
                options.setIntraOpNumThreads(1)
                options.setInterOpNumThreads(1)
                env.createTrainingSession(
                    checkpoint.absolutePath, spec.training.absolutePath, spec.eval.absolutePath,
                    spec.optimizer.absolutePath, options,
                )
            }
        }
    }

    private fun require(): OrtTrainingSession =
        session ?: throw IOException("no policy training session: open() a checkpoint first")

    override fun trainStep(batch: FedAvgRound.Batch, learningRate: Float): Float = ort("train a step") {
        val s = require()
        s.setLearningRate((learningRate * learningRateScale).toFloat())
        val b = batch.size.toLong()
        val mask = ByteBuffer.allocateDirect(batch.mask.size)
        batch.mask.forEach { mask.put(if (it) 1.toByte() else 0.toByte()) }
        mask.rewind()
        val feeds = LinkedHashMap<String, OnnxTensor>()
        try {
            feeds["cells"] = OnnxTensor.createTensor(env, LongBuffer.wrap(batch.cells), longArrayOf(b, 48))
            feeds["features"] = OnnxTensor.createTensor(env, FloatBuffer.wrap(batch.features), longArrayOf(b, 48, 11))
            feeds["mask"] = OnnxTensor.createTensor(env, mask, longArrayOf(b, 47, 4), OnnxJavaType.BOOL)
            feeds["targets"] = OnnxTensor.createTensor(env, FloatBuffer.wrap(batch.targets), longArrayOf(b, 47, 4))
        } catch (err: OrtException) {
            feeds.values.forEach { it.close() }
            throw err
        }
        s.step(feeds)
    }

    override fun saveCheckpoint(path: File) = ort("save the policy checkpoint") {
        require().saveCheckpoint(path.toPath(), false)
    }

    override fun close() {
        session?.close()
        session = null
    }
}
