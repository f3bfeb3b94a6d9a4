// Times TF.js graph models side by side in one Node process (@tensorflow/tfjs, pure JS CPU
// backend), for benchmarks/handwritten_tfjs.py.
// usage: node tfjs_interleaved.js NODE_MODULES REQUEST.json RESULT.json
// REQUEST: {"models": {label: dir}, "rounds": N, "target_ms": T,
//           "inputs": {batch: {"shape": [...], "data": [...]}}}
// RESULT: {"tfjs": version, "backend": name, "batches": {batch: {"calls_per_round": n,
//          "settle": bool, "outputs": {label: {"shape", "data"}},
//          "samples_ms": {label: [ms per call, ...]}}}}
// Per batch: one warm-up call of each model, one block size for all (T ms of the fastest),
// then N rounds; each round times a block of calls per model, the order reversed every other
// round (the model after the other pays the switch alike). Blocks of calls shorter than T
// start with one untimed call, so that the switch from the other model is not timed; a call
// longer than that (the transformer: seconds) needs none.
const fs = require('fs');
const path = require('path');

const [nodeModules, requestPath, resultPath] = process.argv.slice(2);
const tf = require(path.join(nodeModules, '@tensorflow', 'tfjs'));

function readArtifacts(modelDir) {
  // Plain @tensorflow/tfjs has no file loader in Node (tf.io.fileSystem is tfjs-node's).
  const model = JSON.parse(fs.readFileSync(path.join(modelDir, 'model.json'), 'utf8'));
  const weightSpecs = [];
  const buffers = [];
  for (const group of model.weightsManifest) {
    weightSpecs.push(...group.weights);
    for (const p of group.paths) buffers.push(fs.readFileSync(path.join(modelDir, p)));
  }
  const all = Buffer.concat(buffers);
  return {
    modelTopology: model.modelTopology, format: model.format, generatedBy: model.generatedBy,
    convertedBy: model.convertedBy, signature: model.signature,
    userDefinedMetadata: model.userDefinedMetadata, modelInitializer: model.modelInitializer,
    weightSpecs,
    weightData: all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength),
  };
}

async function call(model, x) {
  // executeAsync runs graphs with and without control flow alike; the result is read back.
  const out = await model.executeAsync(x);
  const first = Array.isArray(out) ? out[0] : out;
  const result = {shape: first.shape, data: await first.data()};
  for (const t of (Array.isArray(out) ? out : [out])) t.dispose();
  return result;
}

async function timeBlock(model, x, calls, settle) {
  if (settle) await call(model, x);
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await call(model, x);
  return Number(process.hrtime.bigint() - start) / 1e6 / calls;
}

async function main() {
  await tf.setBackend('cpu');
  const request = JSON.parse(fs.readFileSync(requestPath, 'utf8'));
  const labels = Object.keys(request.models);
  const models = {};
  for (const label of labels) {
    models[label] = await tf.loadGraphModel(tf.io.fromMemory(readArtifacts(request.models[label])));
  }
  const result = {tfjs: tf.version.tfjs, backend: tf.getBackend(), batches: {}};
  for (const [batch, spec] of Object.entries(request.inputs)) {
    const x = tf.tensor(spec.data, spec.shape, 'float32');
    const entry = {outputs: {}, samples_ms: {}, calls_per_round: 1};
    let fastest = Infinity;
    for (const label of labels) {
      const out = await call(models[label], x);   // warm-up (kernels, weights uploaded)
      entry.outputs[label] = {shape: out.shape, data: Array.from(out.data)};
      fastest = Math.min(fastest, await timeBlock(models[label], x, 1, false));
      entry.samples_ms[label] = [];
    }
    entry.calls_per_round = Math.max(1, Math.min(50, Math.floor(request.target_ms / fastest)));
    entry.settle = fastest < request.target_ms;
    for (let round = 0; round < request.rounds; round++) {
      const order = round % 2 === 0 ? labels : [...labels].reverse();
      for (const label of order) {
        entry.samples_ms[label].push(await timeBlock(models[label], x, entry.calls_per_round,
                                                   entry.settle));
      }
    }
    x.dispose();
    result.batches[batch] = entry;
  }
  fs.writeFileSync(resultPath, JSON.stringify(result));
}

main().catch((e) => { console.error(e && e.stack || String(e)); process.exit(1); });
