#!/usr/bin/env bash
# bench/train_identity.sh: a digest of what `tfm train` writes, to show that two builds train
# byte for byte alike (a refactor of the training loop must not change a bit).
#
#   bench/train_identity.sh BUILD [OUT_DIR]
#
# BUILD is a build folder holding `tfm`. Trains four tiny runs (1 layer, d_model 16, one thread, a
# fixed seed, on a generated corpus): 6 updates then a resume to 10 (checkpoints every 2,
# validation with BLEU every 4), an update of 2 accumulated batches, a warmup and checkpoints
# fitted to a budget of 8 updates, and one epoch validated at its end. Prints the sha256 of every
# file of every checkpoint (state.json without elapsed_s, its only field that is a time), of
# metrics.jsonl without its times (elapsed_s, tokens_per_second) and of each log without its clock
# readings (tok/s, elapsed, left, the corpus's reading time) and with OUT_DIR written "OUT" (kept
# as OUT_DIR/<run>.log.normalised). Run it for both builds and diff the outputs.
set -euo pipefail
if (($# < 1)); then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
tfm="$(realpath "$1")/tfm"
out="${2:-$(mktemp -d /tmp/tfm-train-identity-XXXXXX)}"
mkdir -p "$out"
out="$(realpath "$out")"
python3 - "$out" <<'PY'
import random, sys
out = sys.argv[1]
rng = random.Random(7)
words = ["the", "a", "house", "cat", "dog", "sees", "is", "small", "big", "red", "green", "runs"]
with open(f"{out}/en.txt", "w") as en, open(f"{out}/de.txt", "w") as de:
    for _ in range(300):
        s = [rng.choice(words) for _ in range(rng.randint(3, 12))]
        en.write(" ".join(s) + "\n")
        de.write(" ".join(w[::-1] for w in s) + "\n")
PY
recipe() {  # run_dir, extra lines
  cat <<YAML
model:
  layers: 1
  d_model: 16
  d_ff: 32
  heads: 2
  d_k: 8
  d_v: 8
  max_positions: 128
data:
  train_source: $out/en.txt
  train_target: $out/de.txt
  valid_source: $out/en.txt
  valid_target: $out/de.txt
  vocab_size: 100
  max_tokens: 400
$2
training:
  log_every: 2
  threads: 1
  seed: 3
  run_dir: $out/$1
validation:
  every_steps: 4
  max_sentences: 20
YAML
}
{ recipe plain "checkpoints:
  every_steps: 2
  keep: 10"; } >"$out/plain.yaml"
{ recipe accumulated "  accumulate: 2
checkpoints:
  every_steps: 2
  keep: 10"; } >"$out/accumulated.yaml"
{ recipe fitted "optimizer:
  warmup: 1000
  warmup_fraction: 0.25
checkpoints:
  every_fraction: 0.25
  keep: 10"; } >"$out/fitted.yaml"
(
  cd "$out"
  "$tfm" train -c plain.yaml --max-steps 6 2>plain.log
  "$tfm" train -c plain.yaml --max-steps 10 --resume 2>>plain.log
  "$tfm" train -c accumulated.yaml --max-steps 4 2>accumulated.log
  "$tfm" train -c fitted.yaml --max-steps 8 2>fitted.log
  "$tfm" train -c plain.yaml --set training.run_dir="$out/epoch" --set training.max_epochs=1 \
    --set validation.every_steps=0 2>epoch.log
)
python3 - "$out" <<'PY'
import hashlib, json, os, re, sys
out = sys.argv[1]
def digest(data):
    return hashlib.sha256(data).hexdigest()
for run in ["plain", "accumulated", "fitted", "epoch"]:
    folder = f"{out}/{run}/checkpoints"
    for step in sorted(os.listdir(folder)):
        for name in sorted(os.listdir(f"{folder}/{step}")):
            path = f"{folder}/{step}/{name}"
            data = open(path, "rb").read()
            if name == "state.json":
                state = json.loads(data)
                state.get("extra", {}).pop("elapsed_s", None)
                state.pop("crc32", None)  # a CRC over the text with elapsed_s
                data = json.dumps(state, sort_keys=True).encode()
            print(digest(data), f"{run}/{step}/{name}")
    records = []
    for line in open(f"{out}/{run}/metrics.jsonl"):
        record = json.loads(line)
        record.pop("elapsed_s", None)
        record.pop("tokens_per_second", None)
        records.append(json.dumps(record, sort_keys=True))
    print(digest("\n".join(records).encode()), f"{run}/metrics.jsonl (no times)")
    log = open(f"{out}/{run}.log").read()
    log = re.sub(r"\d+ tok/s", "N tok/s", log)
    log = re.sub(r"\d+:\d\d:\d\d", "H:MM:SS", log)
    log = re.sub(r"partial-\d+", "partial-PID", log)
    log = re.sub(r"in [0-9.]+ s\b", "in T s", log).replace(out, "OUT")
    log = re.sub(r"\.[0-9a-f]{16}\.tfmcorpus", ".HASH.tfmcorpus", log)  # of the path
    open(f"{out}/{run}.log.normalised", "w").write(log)
    print(digest(log.encode()), f"{run}.log (no clock readings)")
PY
echo "(runs kept in $out)" >&2
