// Runs a TF.js graph model in Node with @tensorflow/tfjs (pure JS CPU backend).
// usage: node run_model.js MODEL_DIR REQUEST.json RESULT.json
//        node run_model.js --calls CALLS.json RESULTS.json
// REQUEST: {"inputs": {name: {"dtype", "shape", "data" (flat)}}, "outputs": [names] or null,
//           "repeat": N (time N more calls after the first; 0 = none)}
// RESULT: {"outputs": [{"dtype", "shape", "data"}], "ms_per_call": number|null}
// --calls: several models in one process (one Node start for a test module): CALLS is a list
// of REQUESTs each with "model": MODEL_DIR; RESULTS the list of their RESULTs, in order.
// Weights are read from disk here and handed over with tf.io.fromMemory: in Node,
// tf.io.fileSystem belongs to @tensorflow/tfjs-node (a native download we do not install).
const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');

function readArtifacts(modelDir) {
  const model = JSON.parse(fs.readFileSync(path.join(modelDir, 'model.json'), 'utf8'));
  const weightSpecs = [];
  const buffers = [];
  for (const group of model.weightsManifest) {
    weightSpecs.push(...group.weights);
    for (const p of group.paths) buffers.push(fs.readFileSync(path.join(modelDir, p)));
  }
  const all = Buffer.concat(buffers);
  return {
    modelTopology: model.modelTopology,
    format: model.format,
    generatedBy: model.generatedBy,
    convertedBy: model.convertedBy,
    signature: model.signature,
    userDefinedMetadata: model.userDefinedMetadata,
    modelInitializer: model.modelInitializer,
    weightSpecs,
    weightData: all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength),
  };
}

async function runRequest(model, request) {
  const inputs = {};
  for (const [name, spec] of Object.entries(request.inputs)) {
    inputs[name] = tf.tensor(spec.data, spec.shape, spec.dtype);
  }
  const outputNames = request.outputs || undefined;
  const run = async () => {
    const out = await model.executeAsync(inputs, outputNames);
    return Array.isArray(out) ? out : [out];
  };
  const outs = await run();
  const result = {outputs: [], ms_per_call: null, backend: tf.getBackend(), tfjs: tf.version.tfjs};
  for (const t of outs) {
    result.outputs.push({dtype: t.dtype, shape: t.shape, data: Array.from(await t.data())});
  }
  const repeat = request.repeat || 0;
  if (repeat > 0) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < repeat; i++) {
      const o = await run();
      for (const t of o) { await t.data(); t.dispose(); }
    }
    result.ms_per_call = Number(process.hrtime.bigint() - start) / 1e6 / repeat;
  }
  return result;
}

async function main() {
  const args = process.argv.slice(2);
  await tf.setBackend('cpu');
  const models = {};
  const load = async (dir) => {
    models[dir] = models[dir] || await tf.loadGraphModel(tf.io.fromMemory(readArtifacts(dir)));
    return models[dir];
  };
  if (args[0] === '--calls') {
    const [, callsPath, resultPath] = args;
    const results = [];
    for (const call of JSON.parse(fs.readFileSync(callsPath, 'utf8'))) {
      results.push(await runRequest(await load(call.model), call));
    }
    fs.writeFileSync(resultPath, JSON.stringify(results));
    return;
  }
  const [modelDir, requestPath, resultPath] = args;
  const request = JSON.parse(fs.readFileSync(requestPath, 'utf8'));
  fs.writeFileSync(resultPath, JSON.stringify(await runRequest(await load(modelDir), request)));
}

main().catch((e) => { console.error(e && e.stack || String(e)); process.exit(1); });
