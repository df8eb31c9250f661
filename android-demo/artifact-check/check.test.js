// The bundle's discriminator training artifacts run in ONNX Runtime's own training core — onnxruntime-web
// 1.19.2's WebAssembly build of the C++ training API that onnxruntime-training-android 1.19.2 ships — and
// must give the Python SDK's numbers (android-demo/vectors/training.json): the loss of each of 20 AdamW
// steps and the eval scores after them within 1e-6, and the inference models' outputs.
//
// Run: npm ci --ignore-scripts && node --test   (VECTORS=<dir> to point elsewhere)
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');

// the package's export map hides the training build from Node: load it by its file path
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-web', 'dist', 'ort.training.wasm.min.js'));
ort.env.wasm.numThreads = 1;   // no worker threads: deterministic, and nothing left running after the test

const VECTORS = process.env.VECTORS || path.join(__dirname, '..', 'vectors');
const BUNDLE = path.join(VECTORS, 'bundle');
const ref = JSON.parse(fs.readFileSync(path.join(VECTORS, 'training.json'), 'utf8'));
const manifest = JSON.parse(fs.readFileSync(path.join(BUNDLE, 'manifest.json'), 'utf8'));
const file = (name) => new Uint8Array(fs.readFileSync(path.join(BUNDLE, name)));
const models = manifest.discriminator.models;
const F = manifest.features.n_pair_features;

function pairsTensor(rows) {
  const data = new Float32Array(rows.length * F);
  rows.forEach((r, i) => data.set(ref.pairs.slice(r * F, (r + 1) * F), i * F));
  return new ort.Tensor('float32', data, [rows.length, F]);
}

function labelsTensor(rows) {
  return new ort.Tensor('float32', Float32Array.from(rows.map((r) => ref.labels[r])), [rows.length]);
}

function assertClose(got, want, tol, what) {
  assert.strictEqual(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const scale = Math.max(1, Math.abs(want[i]));
    assert.ok(Math.abs(got[i] - want[i]) <= tol * scale, `${what}[${i}]: ${got[i]} here, ${want[i]} in the Python SDK`);
  }
}

test('the manifest names the artifacts and the learning rate ORT uses by default', () => {
  // onnxruntime-web has no setLearningRate: its optimizer starts at ORT's default 0.001, so the check is
  // only meaningful while the bundle asks for that rate too
  assert.strictEqual(ref.learning_rate, 0.001);
  assert.strictEqual(manifest.discriminator.optimizer.learning_rate, 0.001);
  for (const role of ['training', 'eval', 'optimizer', 'inference']) {
    assert.ok(fs.existsSync(path.join(BUNDLE, models[role].file)), role);
  }
});

test('20 AdamW steps in ORT\'s training core give the Python losses and scores', async () => {
  const session = await ort.TrainingSession.create({
    checkpointState: file(manifest.discriminator.checkpoint),
    trainModel: file(models.training.file),
    evalModel: file(models.eval.file),
    optimizerModel: file(models.optimizer.file),
  });
  try {
    const losses = [];
    for (const rows of ref.batches) {
      const out = await session.runTrainStep({ pairs: pairsTensor(rows), labels: labelsTensor(rows) });
      losses.push(out.loss.data[0]);
      await session.runOptimizerStep();
      await session.lazyResetGrad();
    }
    assertClose(losses, ref.losses, 1e-6, 'loss');
    assert.ok(losses[losses.length - 1] < losses[0] - 0.1, 'the steps train (the loss falls)');
    const out = await session.runEvalStep({ pairs: pairsTensor(ref.eval_rows), labels: labelsTensor(ref.eval_rows) });
    assertClose(Array.from(out.prob.data), ref.eval_prob, 1e-6, 'eval prob');
  } finally {
    await session.release();
  }
});

test('the inference models give the Python outputs', async () => {
  const disc = await ort.InferenceSession.create(file(models.inference.file));
  const out = await disc.run({ pairs: pairsTensor(ref.eval_rows) });
  assertClose(Array.from(out.prob.data), ref.inference_prob, 1e-6, 'discriminator prob');
  assertClose(Array.from(out.logit.data), ref.inference_logit, 1e-5, 'discriminator logit');
  await disc.release();

  const p = ref.policy_inputs;
  const [n, T] = p.shape;
  const policy = await ort.InferenceSession.create(file(manifest.policy.model.file));
  const res = await policy.run({
    cells: new ort.Tensor('int64', BigInt64Array.from(p.cells.map(BigInt)), [n, T]),
    features: new ort.Tensor('float32', Float32Array.from(p.features), [n, T, 11]),
    mask: new ort.Tensor('bool', Uint8Array.from(p.mask), [n, T, 4]),
  });
  assertClose(Array.from(res.log_probs.data), ref.policy_log_probs, 1e-5, 'policy log_probs');
  assertClose(Array.from(res.values.data), ref.policy_values, 1e-5, 'policy values');
  await policy.release();
});
