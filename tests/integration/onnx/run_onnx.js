// onnxruntime's logits for ddp_train ONNX exports, the outside oracle of test_onnx_export.sh.
//   node run_onnx.js ORT_MODULE_DIR MODEL.onnx INPUTS.f32 N C H W OUT.json [MODEL.onnx ... OUT.json]...
// INPUTS.f32: N*C*H*W little-endian float32 (already normalised); OUT.json: the logits, N rows.
// Several models (groups of 7 arguments) run one after the other in one process, each in a
// session of its own; the first that fails ends it, naming the model.
const [ortDir, ...groups] = process.argv.slice(2);
const ort = require(require('path').resolve(ortDir, 'node_modules', 'onnxruntime-node'));
const fs = require('fs');

async function run(modelPath, inputPath, n, c, h, w, outPath) {
  const dims = [n, c, h, w].map(Number);
  const bytes = fs.readFileSync(inputPath);
  const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  if (data.length !== dims.reduce((a, b) => a * b)) throw new Error('input size mismatch');
  // One thread, no graph rewrites: the arithmetic the model describes, nothing fused.
  const session = await ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'], graphOptimizationLevel: 'disabled', intraOpNumThreads: 1,
  });
  const rows = [];
  const batch = 32;
  for (let first = 0; first < dims[0]; first += batch) {
    const m = Math.min(batch, dims[0] - first);
    const per = dims[1] * dims[2] * dims[3];
    const x = new ort.Tensor('float32', data.slice(first * per, (first + m) * per),
                             [m, dims[1], dims[2], dims[3]]);
    const out = await session.run({input: x});
    const y = out.logits;
    const k = y.dims[1];
    for (let i = 0; i < m; i++) rows.push(Array.from(y.data.slice(i * k, (i + 1) * k)));
  }
  fs.writeFileSync(outPath, JSON.stringify(rows));
}

(async () => {
  if (groups.length === 0 || groups.length % 7 !== 0) throw new Error('usage: see run_onnx.js');
  for (let g = 0; g < groups.length; g += 7) {
    try {
      await run(...groups.slice(g, g + 7));
    } catch (e) {
      throw new Error(groups[g] + ': ' + e.message);
    }
  }
})().catch((e) => { console.error('onnxruntime: ' + e.message); process.exit(1); });
