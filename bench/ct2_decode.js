// Times CTranslate2 decoding one batch, for bench/ctranslate2.sh (CTranslate2 through the npm package
// `ctranslate2`, a Node.js binding of its C++ library):
//
//   node bench/ct2_decode.js BINDING.node CT2_MODEL_DIR SOURCES.txt --beams 4,1 --threads 2 \
//       --runs 3 --warmup 1 --label int8 [--outputs OUT.json]
//
// SOURCES.txt: one sentence a line, word tokens "w<id>" (bench/ct2_convert.py's vocabulary). All lines
// are translated as one batch (max_batch_size = the number of lines). Prints a JSON line per beam size
// as bench_decode does; --outputs writes the best hypotheses as token ids, {mode: [[ids]...]}.
"use strict";

const fs = require("fs");

function parseArgs(argv) {
  const [binding, modelDir, sourcesPath, ...rest] = argv;
  if (!binding || !modelDir || !sourcesPath)
    throw new Error("usage: ct2_decode.js BINDING.node CT2_MODEL_DIR SOURCES.txt [options]");
  const options = { beams: [4, 1], threads: 2, runs: 3, warmup: 1, label: "", outputs: "" };
  for (let i = 0; i < rest.length; i += 2) {
    const [flag, value] = [rest[i], rest[i + 1]];
    if (value === undefined) throw new Error(`${flag}: a value is missing`);
    if (flag === "--beams") options.beams = value.split(",").map(Number);
    else if (flag === "--threads") options.threads = Number(value);
    else if (flag === "--runs") options.runs = Number(value);
    else if (flag === "--warmup") options.warmup = Number(value);
    else if (flag === "--label") options.label = value;
    else if (flag === "--outputs") options.outputs = value;
    else throw new Error(`unknown option ${flag}`);
  }
  return { binding, modelDir, sourcesPath, options };
}

// bench/ct2_convert.py's vocabulary: the specials keep their names (ids 0-3), the rest are w<id>.
const SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"];

function tokenIds(text) {
  return text
    .split(/\s+/)
    .filter((t) => t.length > 0)
    .map((t) => {
      if (SPECIALS.includes(t)) return SPECIALS.indexOf(t);
      if (!/^w\d+$/.test(t)) throw new Error(`output token ${JSON.stringify(t)} is not w<id>`);
      return Number(t.slice(1));
    });
}

async function main() {
  const { binding, modelDir, sourcesPath, options } = parseArgs(process.argv.slice(2));
  const { Ct2Translator } = require(binding);
  const sources = fs
    .readFileSync(sourcesPath, "utf8")
    .split("\n")
    .filter((line) => line.length > 0);
  const translator = new Ct2Translator({ modelPath: modelDir, device: "cpu", threads: options.threads });
  const outputs = {};
  for (const beam of options.beams) {
    let total = 0;
    let best = Infinity;
    let results = [];
    for (let run = 0; run < options.warmup + options.runs; ++run) {
      const start = process.hrtime.bigint();
      results = await translator.translateBatch(sources, { beamSize: beam, maxBatchSize: sources.length });
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      const warm = run < options.warmup;
      process.stderr.write(`ctranslate2 ${options.label} beam ${beam} run ${run}: ${seconds.toFixed(3)} s${warm ? " (warm-up)" : ""}\n`);
      if (warm) continue;
      total += seconds;
      best = Math.min(best, seconds);
    }
    const ids = results.map((r) => tokenIds(r.text));
    const tokens = ids.reduce((n, s) => n + s.length, 0);
    const mode = (beam === 1 ? "greedy" : `beam${beam}`) + (options.label ? `-${options.label}` : "");
    outputs[mode] = ids;
    const mean = total / options.runs;
    console.log(
      JSON.stringify({
        framework: "ctranslate2", mode, precision: options.label, batch: sources.length,
        threads: options.threads, runs: options.runs, warmup: options.warmup,
        seconds: Number(mean.toFixed(4)), best_seconds: Number(best.toFixed(4)),
        output_tokens: tokens, target_tokens_per_second: Number((tokens / mean).toFixed(1)),
      }),
    );
  }
  if (options.outputs) fs.writeFileSync(options.outputs, JSON.stringify(outputs) + "\n");
}

main().catch((error) => {
  process.stderr.write(`ct2_decode.js: ${error.message}\n`);
  process.exit(1);
});
