// The policy's maximum-likelihood training artifacts of a DP-FedAvg bundle (its policy_training section) in
// ONNX Runtime's own training core — onnxruntime-web 1.19.2's WebAssembly build of the C++ training API that
// onnxruntime-training-android 1.19.2 ships — opened on a checkpoint the Java core wrote the round's parameters
// into (PolicyCheckpoint), with the optimizer model (SGD as AdamW: betas 0, 0, eps 1e8; ONNX Runtime's SGD
// optimizer model does not open in this core): the training step's loss on each minibatch must be the Python
// SDK's at those parameters, and the optimizer steps run. onnxruntime-web has no setLearningRate: its sessions
// start at ORT's default rate, 0.001, which is an SGD rate of 1e-11 here — the steps leave the parameters, and
// the losses, where they were. The vectors are written at test time by tests/android/test_artifact_check.py
// (POLICY_VECTORS=<dir>); without them this file skips.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');

const DIR = process.env.POLICY_VECTORS;

test('the policy training model runs in ORT\'s training core on a checkpoint Java wrote', { skip: !DIR && 'POLICY_VECTORS not set' }, async () => {
  const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-web', 'dist', 'ort.training.wasm.min.js'));
  ort.env.wasm.numThreads = 1;
  const ref = JSON.parse(fs.readFileSync(path.join(DIR, 'policy.json'), 'utf8'));
  const file = (name) => new Uint8Array(fs.readFileSync(path.join(DIR, name)));
  const session = await ort.TrainingSession.create({
    checkpointState: file(ref.checkpoint), trainModel: file(ref.training), evalModel: file(ref.eval),
    optimizerModel: file(ref.optimizer),
  });
  try {
    const [T, F, D, A] = [48, 11, 47, 4];
    for (let k = 0; k < ref.batches.length; k++) {
      const b = ref.batches[k];
      const n = b.cells.length / T;
      const feeds = () => ({
        cells: new ort.Tensor('int64', BigInt64Array.from(b.cells.map(BigInt)), [n, T]),
        features: new ort.Tensor('float32', Float32Array.from(b.features), [n, T, F]),
        mask: new ort.Tensor('bool', Uint8Array.from(b.mask), [n, D, A]),
        targets: new ort.Tensor('float32', Float32Array.from(b.targets), [n, D, A]),
      });
      const train = (await session.runTrainStep(feeds())).loss.data[0];
      await session.runOptimizerStep();
      await session.lazyResetGrad();
      const evalLoss = (await session.runEvalStep(feeds())).loss.data[0];
      for (const [what, got] of [['training step', train], ['eval', evalLoss]]) {
        const want = ref.losses[k];
        assert.ok(Math.abs(got - want) <= 2e-6 * Math.abs(want), `batch ${k} ${what} loss ${got} here, ${want} in the Python SDK`);
      }
    }
  } finally {
    await session.release();
  }
});
