#!/usr/bin/env bash
# Regenerates the committed seed corpus fuzz/corpus/<target>/ (a few KB in all): tiny model
# directories, a checkpoint and safetensors files written by tfm itself (build/fuzz/make_seed_files),
# the recipes of configs/, the trees of the tests, and a few hand-made invalid files. model_dir and checkpoint inputs pack
# two files as fuzz_util.h's split2 reads them: 2 bytes (little-endian) of the first file's length,
# the first file, the second file.
# Usage: fuzz/make_seeds.sh   (builds build/fuzz first through scripts/fuzz.sh --build-only)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fuzz.sh --build-only >/dev/null
files="$(mktemp -d)"
trap 'rm -rf "$files"' EXIT
build/fuzz/make_seed_files "$files"
checkpoint="$(ls -d "$files"/checkpoints/step-*)"

corpus=fuzz/corpus
rm -rf "$corpus"
mkdir -p "$corpus"/{safetensors,config_json,model_dir,checkpoint,recipe,serve_request,trees}

pack() {  # pack <first file> <second file> <output>
  python3 - "$1" "$2" "$3" <<'PY'
import sys
a = open(sys.argv[1], 'rb').read()
b = open(sys.argv[2], 'rb').read()
assert len(a) < 65536
open(sys.argv[3], 'wb').write(len(a).to_bytes(2, 'little') + a + b)
PY
}

# safetensors: valid files of every dtype, and damaged ones.
s="$corpus/safetensors"
cp "$files/model/model.safetensors" "$s/tiny-model.safetensors"
cp "$files/model-learned-pre-bias/model.safetensors" "$s/tiny-learned-pre-bias.safetensors"
cp "$checkpoint/optimizer.safetensors" "$s/optimizer.safetensors"
cp "$files/dtypes.safetensors" "$s/dtypes.safetensors"
cp "$files/empty.safetensors" "$s/empty.safetensors"
head -c 200 "$files/dtypes.safetensors" > "$s/truncated.safetensors"
printf '\xff\xff\xff\xff\xff\xff\xff\x7f{}' > "$s/huge-header-length.safetensors"
printf '\x10\x00\x00\x00\x00\x00\x00\x00[1, 2, 3]       ' > "$s/header-not-object.safetensors"

# config.json: the seeds' configurations, the test fixture's, the defaults, and invalid ones.
c="$corpus/config_json"
cp "$files/model/config.json" "$c/tiny.json"
cp "$files/model-learned-pre-bias/config.json" "$c/learned-pre-bias.json"
cp tests/fixtures/tiny/config.json "$c/fixture-tiny.json"
printf '{}' > "$c/defaults.json"
printf '{"layers": -1, "heads": 3}' > "$c/bad-values.json"
printf '{"d_model": "512"}' > "$c/bad-type.json"
printf '{"layerz": 6}' > "$c/unknown-key.json"
printf '[1, 2]' > "$c/not-object.json"

# model_dir: config.json + model.safetensors, matching and not.
m="$corpus/model_dir"
pack "$files/model/config.json" "$files/model/model.safetensors" "$m/tiny"
pack "$files/model-learned-pre-bias/config.json" "$files/model-learned-pre-bias/model.safetensors" \
  "$m/learned-pre-bias"
pack "$files/model/config.json" "$files/model-learned-pre-bias/model.safetensors" "$m/mismatch"
pack "$files/model/config.json" "$files/dtypes.safetensors" "$m/wrong-tensors"

# checkpoint: state.json + optimizer.safetensors (the model is fuzz_checkpoint's fixed tiny model).
k="$corpus/checkpoint"
pack "$checkpoint/state.json" "$checkpoint/optimizer.safetensors" "$k/step-10"
printf '{"step": 1, "epoch": 0, "batch_in_epoch": 0, "seed": 1}' > "$files/bare-state.json"
pack "$files/bare-state.json" "$checkpoint/optimizer.safetensors" "$k/bare-state"
pack "$checkpoint/state.json" "$files/empty.safetensors" "$k/no-moments"
pack "$checkpoint/state.json" "$files/dtypes.safetensors" "$k/wrong-moments"

# recipe: the shipped recipe, a small complete one, and invalid ones.
r="$corpus/recipe"
cp configs/*.yaml "$r"/
cat > "$r/small.yaml" <<'YAML'
model:
  preset: base
  layers: 1
  d_model: 16
  d_ff: 32
  heads: 2
  d_k: 8
  d_v: 8
  positional: learned
  norm: pre
  attention_bias: true
data:
  train_source: ${TFM_DATA_DIR}/train.en
  train_target: ${TFM_DATA_DIR}/train.de
  vocab_size: 100
  max_length: 20
  max_tokens: 200
  skip_empty_lines: true
optimizer: {warmup: 10, warmup_fraction: 0.1, clip_norm: 1.0}
training: {max_steps: 100, seed: 3, threads: 1, precision: f32, run_dir: runs/x}
checkpoints: {every_steps: 10, every_minutes: 0, keep: 2}
validation: {every_steps: 50, bleu: false, max_sentences: 10}
YAML
printf 'data:\n  max_tokns: 100\n' > "$r/typo.yaml"
printf 'data:\n  max_tokens: lots\n' > "$r/bad-type.yaml"
printf 'data: [1, 2\n' > "$r/bad-syntax.yaml"
printf 'data:\n  vocab: ${TFM_UNSET_VARIABLE_X}/v.model\n' > "$r/unset-variable.yaml"
printf 'model:\n  preset: big\n  dropout: 1.5\n' > "$r/bad-value.yaml"
printf -- '- a\n- b\n' > "$r/not-map.yaml"

# serve_request: request bodies of both JSON shapes and raw HTTP requests, valid and not.
q="$corpus/serve_request"
printf '{"q": "A man runs in the park ."}' > "$q/libretranslate-one"
printf '{"q": ["a b", "", "c"], "model": "de", "beam_size": 4, "n_best": 2, "alignment": true, "api_key": "k", "source": "en", "target": "de", "format": "text"}' > "$q/libretranslate-all-fields"
printf '{"q": "a", "alternatives": 2}' > "$q/libretranslate-alternatives"
printf '[{"src": "a b", "id": 100}, {"src": "c", "id": "de"}]' > "$q/opennmt"
printf '{"q": "A man", "x": 1e400}' > "$q/number-overflow"
printf '{"q": "a", "q": "b"}' > "$q/repeated-key"
printf '{"q": "caf\xc3\x28"}' > "$q/invalid-utf8"
printf 'POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"q": "a b"}\n' > "$q/http-request"
printf 'POST /translate HTTP/1.1\r\nContent-Length: 13\r\nContent-Length: 5\r\n\r\n{"q": "a b"}\n' > "$q/http-two-lengths"
printf 'POST /translate HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\n\r\n' > "$q/http-chunked"
printf 'GET /health HTTP/1.1\r\nX-Note: a\x00b\r\n\r\n' > "$q/http-nul"
printf 'POST /translate HTTP/1.1\r\nContent-Length: -5\r\n\r\n' > "$q/http-negative-length"
# trees: the trees of tests/test_trees.cc, test_evalb.cc and test_cli_parse.cc, one a line and as
# .mrg text (plain and gzip), and invalid ones.
t="$corpus/trees"
cat > "$t/lines.trees" <<'TREES'
(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))
(TOP (S (NP (PRP He)) (VP (VBD left)) (. .)))

(TOP (NP (NP (DT a) (NN dog)) (, ,) (NP (DT a) (NN mat))))
()
(TOP (S (NP (DT a) (NN b)) (`` ``) (POS ') ('' '') (? ?) (-LRB- -LCB-) (PRP$ his)))
TREES
cat > "$t/wsj.mrg" <<'TREES'
( (S
    (NP-SBJ-1 (PRP He) )
    (VP (VBD said)
      (SBAR (-NONE- 0)
        (S (-NONE- *T*-1) )))
    (ADVP-TMP=2 (RB now) )
    (PRT (RP up) )
    (. .) ))
( (NP (NN c)))
TREES
gzip -9n -c "$t/wsj.mrg" > "$t/wsj.mrg.gz"
printf '(TOP (NN a))\n(TOP (NN a)\n' > "$t/unclosed.trees"
printf '(TOP (NN a)) (TOP (NN b))\n' > "$t/two-on-a-line.trees"
printf '(TOP (NP (DT a) dog))\n' > "$t/word-beside-constituents.trees"
printf '(TOP (NP))\n' > "$t/no-children.trees"
python3 -c "print('(TOP ' + '(A ' * 1000 + '(X y)' + ')' * 1001)" > "$t/too-deep.trees"

du -sh "$corpus"
