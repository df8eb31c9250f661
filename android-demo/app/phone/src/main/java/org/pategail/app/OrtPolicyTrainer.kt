package org.pategail.app

import ai.onnxruntime.OnnxJavaType
import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import ai.onnxruntime.OrtTrainingSession
import java.io.File
import java.nio.ByteBuffer
import java.nio.FloatBuffer
import java.nio.LongBuffer
import org.pategail.core.Bundle
import org.pategail.core.FedAvgRound
import org.pategail.core.PolicyTrainer

/**
 * The core's [PolicyTrainer] on ONNX Runtime's Android training package (onnxruntime-training-android 1.19.2):
 * a session on the bundle's policy training, eval and (SGD) optimizer models, opened on the checkpoint file the
 * core wrote the round's global parameters into, and saved to the file the core reads the trained ones from
 * (the Java API has no call that reads or sets a session's parameters). One intra-op thread, as [OrtTrainer].
 */
class OrtPolicyTrainer(private val env: OrtEnvironment = OrtEnvironment.getEnvironment()) : PolicyTrainer {
    private var session: OrtTrainingSession? = null

    override fun open(bundle: Bundle, checkpoint: File) {
        close()
        val spec = bundle.policyTraining ?: throw IllegalStateException("the bundle has no policy training artifacts")
        val options = OrtSession.SessionOptions().apply {
            setIntraOpNumThreads(1)
            setInterOpNumThreads(1)
        }
        session = env.createTrainingSession(
            checkpoint.absolutePath, spec.training.absolutePath, spec.eval.absolutePath, spec.optimizer.absolutePath,
            options,
        )
    }

    private fun require(): OrtTrainingSession =
        session ?: throw IllegalStateException("no policy training session: open() a checkpoint first")

    override fun trainStep(batch: FedAvgRound.Batch, learningRate: Float): Float {
        val s = require()
        s.setLearningRate(learningRate)
        val b = batch.size.toLong()
        val mask = ByteBuffer.allocateDirect(batch.mask.size)
        batch.mask.forEach { mask.put(if (it) 1.toByte() else 0.toByte()) }
        mask.rewind()
        val feeds = mapOf(
            "cells" to OnnxTensor.createTensor(env, LongBuffer.wrap(batch.cells), longArrayOf(b, 48)),
            "features" to OnnxTensor.createTensor(env, FloatBuffer.wrap(batch.features), longArrayOf(b, 48, 11)),
            "mask" to OnnxTensor.createTensor(env, mask, longArrayOf(b, 47, 4), OnnxJavaType.BOOL),
            "targets" to OnnxTensor.createTensor(env, FloatBuffer.wrap(batch.targets), longArrayOf(b, 47, 4)),
        )
        return s.step(feeds)
    }

    override fun saveCheckpoint(path: File) {
        require().saveCheckpoint(path.toPath(), false)
    }

    override fun close() {
        session?.close()
        session = null
    }
}
