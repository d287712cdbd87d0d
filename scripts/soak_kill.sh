#!/usr/bin/env bash
# kill -9 soak (docs/RELIABILITY.md): trains a tiny Multi30k model once without interruption (the
# reference), then again while killing `tfm train` with SIGKILL at random moments (half of the kills
# aimed at checkpoint writes) and restarting it with --resume, until the requested number of kills is
# reached and the run finishes. Passes when every restart resumed from the newest complete
# checkpoint and the final model.safetensors, optimizer.safetensors and config.json equal the
# reference's bit for bit (cmp).
# Usage: scripts/soak_kill.sh [--kills N (50)] [--steps N (kills x every x 5)] [--every N (5)] [--lines N (3000)]
#                             [--seed N] [--dir DIR (build/soak)]
# Data: $TFM_DATA_DIR/multi30k or ../shared/data/multi30k (train.en.gz, train.de.gz).
set -euo pipefail
export LC_ALL=C  # "." in $EPOCHREALTIME and awk numbers
cd "$(dirname "$0")/.."

kills_wanted=50
steps=""
every=5
lines=3000
seed="$$"
dir=build/soak
while [ $# -gt 0 ]; do
  case "$1" in
    --kills) kills_wanted="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --every) every="$2"; shift 2 ;;
    --lines) lines="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak_kill.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
RANDOM="$seed"
# Enough updates that the kills (about 1 checkpoint of progress per life) do not reach the end.
[ -n "$steps" ] || steps=$(( kills_wanted * every * 5 > 100 ? kills_wanted * every * 5 : 100 ))

tfm=build/release/tfm
[ -x "$tfm" ] || { cmake --preset release -G Ninja >/dev/null && cmake --build --preset release -j2; }
data=""
for d in "${TFM_DATA_DIR:-}/multi30k" ../shared/data/multi30k; do
  [ -f "$d/train.en.gz" ] && { data="$d"; break; }
done
[ -n "$data" ] || { echo "soak_kill.sh: no multi30k/train.en.gz under \$TFM_DATA_DIR or ../shared/data" >&2; exit 2; }

rm -rf "$dir"
mkdir -p "$dir/data"
dir="$(cd "$dir" && pwd)"
zcat "$data/train.en.gz" | sed -n "1,${lines}p" > "$dir/data/train.en"
zcat "$data/train.de.gz" | sed -n "1,${lines}p" > "$dir/data/train.de"
# One vocabulary for both runs (the soak is about training and checkpointing).
"$tfm" vocab -i "$dir/data/train.en" -i "$dir/data/train.de" -o "$dir/data/vocab" --size 1000 \
  --threads 1 > "$dir/vocab.log" 2>&1
# Dropout on, so that resuming must also restore the random streams; one thread, so that both runs
# compute the same sums in the same order; checkpoints by steps only (a time interval would differ).
cat > "$dir/recipe.yaml" <<YAML
model: {preset: base, layers: 2, d_model: 64, d_ff: 128, heads: 4, d_k: 16, d_v: 16,
        dropout: 0.1, max_positions: 128}
data: {train_source: $dir/data/train.en, train_target: $dir/data/train.de, vocab: $dir/data/vocab.model,
       max_length: 64, max_tokens: 1024}
optimizer: {warmup: 100}
training: {max_steps: $steps, seed: 1, threads: 1, precision: f32, log_every: $every}
checkpoints: {every_steps: $every, every_minutes: 0, keep: 3}
validation: {bleu: false}
YAML

# The newest complete checkpoint (step-NNNNNNNNN holding state.json; not .partial-*, not .damaged)
# of a run, or nothing.
newest_checkpoint() {
  local best=""
  for c in "$1"/checkpoints/step-*; do
    [[ "$(basename "$c")" =~ ^step-[0-9]{9,}$ ]] && [ -f "$c/state.json" ] && best="$c"
  done
  echo "$best"
}
now() { echo "$EPOCHREALTIME"; }
now_us() { echo "${EPOCHREALTIME/./}"; }
# A random delay in [0, $1] seconds (millisecond steps).
random_delay() { awk -v m="$1" -v r="$RANDOM$RANDOM" 'BEGIN { srand(r); printf "%.3f", m * rand() }'; }

echo "== reference run: $steps updates, a checkpoint every $every ($dir/reference.log)"
t0="$(now)"
"$tfm" train -c "$dir/recipe.yaml" --run-dir "$dir/reference" > "$dir/reference.log" 2>&1 &
ref_pid=$!
first=""
while kill -0 "$ref_pid" 2>/dev/null; do
  [ -z "$first" ] && [ -n "$(newest_checkpoint "$dir/reference")" ] && first="$(now)"
  sleep 0.01
done
wait "$ref_pid" || { echo "soak_kill.sh: the reference run failed:"; tail -5 "$dir/reference.log"; exit 1; }
t1="$(now)"
# Timing: T = one checkpoint interval, S = start-up (until the first update).
read -r interval startup < <(awk -v t0="$t0" -v f="${first:-$t1}" -v t1="$t1" -v n="$steps" -v e="$every" \
  'BEGIN { T = (t1 - f) / ((n - e) / e); if (T <= 0) T = 0.1; S = f - t0 - T; if (S < 0) S = 0;
           printf "%.3f %.3f\n", T, S }')
echo "   $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s; checkpoint interval ~${interval} s, start-up ~${startup} s"

echo "== killed run: $kills_wanted kills ($dir/lives/)"
run="$dir/killed"
mkdir -p "$dir/lives"
kills=0 during_write=0 resumes=0 verified=0 problems=0 life=0 finished=0
while [ "$finished" = 0 ]; do
  life=$((life + 1))
  expected="$(newest_checkpoint "$run")"
  log="$dir/lives/$life.log"
  "$tfm" train -c "$dir/recipe.yaml" --run-dir "$run" --resume > "$log" 2>&1 &
  pid=$!
  if [ "$kills" -lt "$kills_wanted" ]; then
    if [ $((RANDOM % 2)) = 0 ]; then
      mode="random"
      # At a random moment of start-up, training or checkpointing.
      sleep "$(random_delay "$(awk -v s="$startup" -v t="$interval" 'BEGIN { print s + 3 * t }')")"
    else
      # Aimed at the n-th checkpoint write of this life (n = 1..3), a few milliseconds into it.
      n=$((RANDOM % 3 + 1)) seen=0 last=""
      mode="aimed at write $n"
      deadline=$(( $(now_us) + $(awk -v s="$startup" -v t="$interval" -v n="$n" 'BEGIN { printf "%d", (s + (n + 2) * t) * 1e6 }') ))
      while kill -0 "$pid" 2>/dev/null && [ "$seen" -lt "$n" ] && [ "$(now_us)" -lt "$deadline" ]; do
        for p in "$run"/checkpoints/step-*.partial-"$pid"; do
          [ -d "$p" ] && [ "$p" != "$last" ] && { seen=$((seen + 1)); last="$p"; }
        done
        [ "$seen" -lt "$n" ] && sleep 0.002
      done
      # Into the write: at once or after up to 10 ms (a write of this model takes a few ms).
      [ $((RANDOM % 2)) = 0 ] || sleep "$(random_delay 0.01)"
    fi
    kill -9 "$pid" 2>/dev/null || true
  fi
  status=0
  wait "$pid" 2>/dev/null || status=$?
  if [ "$status" = 137 ]; then
    kills=$((kills + 1))
    partial=""
    for p in "$run"/checkpoints/step-*.partial-"$pid"; do [ -d "$p" ] && partial="$p"; done
    [ -n "$partial" ] && during_write=$((during_write + 1))
    echo "   kill $kills (life $life, $mode)${partial:+: during the write of $(basename "$partial")}"
  elif [ "$status" = 0 ]; then
    finished=1
  else
    echo "   FAIL: life $life exited with status $status:"; tail -3 "$log" | sed 's/^/     /'
    problems=$((problems + 1)); break
  fi
  # Did this life resume from the newest complete checkpoint? Checked when it printed where it
  # resumed from, and required when it got far enough to write a checkpoint or finish.
  resumed="$(grep -o 'resuming from [^ ]*' "$log" | head -1 | cut -d' ' -f3)" || true
  after="$(newest_checkpoint "$run")"
  if [ -n "$resumed" ]; then
    resumes=$((resumes + 1))
    if [ "$(basename "$resumed")" = "$(basename "$expected")" ]; then
      verified=$((verified + 1))
    else
      echo "   FAIL: life $life resumed from $resumed, the newest complete checkpoint was ${expected:-none}"
      problems=$((problems + 1))
    fi
  elif [ -n "$expected" ] && { [ "$finished" = 1 ] || [ "$after" != "$expected" ]; }; then
    echo "   FAIL: life $life did not resume from ${expected} (see $log)"
    problems=$((problems + 1))
  fi
done

echo "== comparing the final checkpoints"
ref_final="$(newest_checkpoint "$dir/reference")"
run_final="$(newest_checkpoint "$run")"
echo "   reference: $ref_final"
echo "   killed:    $run_final"
if [ "$(basename "$ref_final")" != "$(basename "$run_final")" ]; then
  echo "   FAIL: the runs ended at different checkpoints"; problems=$((problems + 1))
else
  for f in model.safetensors optimizer.safetensors config.json; do
    if cmp -s "$ref_final/$f" "$run_final/$f"; then
      echo "   $f: identical"
    else
      echo "   FAIL: $f differs"; problems=$((problems + 1))
    fi
  done
  # state.json: the same position in the data (elapsed_s differs, of course, and so does the
  # checksum over it).
  if python3 - "$ref_final/state.json" "$run_final/state.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for s in (a, b):
    s.get("extra", {}).pop("elapsed_s", None)
    s.pop("crc32", None)
sys.exit(a != b)
PY
  then echo "   state.json (without elapsed_s and crc32): identical"
  else echo "   FAIL: state.json differs"; problems=$((problems + 1)); fi
fi

echo "== kills: $kills (of $kills_wanted), during a checkpoint write: $during_write, lives: $life, resumes: $resumes (verified newest: $verified)"
if [ "$kills" -lt "$kills_wanted" ]; then
  echo "   FAIL: the run finished after $kills kills: give more --steps"; problems=$((problems + 1))
fi
if [ "$problems" = 0 ]; then echo "PASS"; else echo "FAIL ($problems problems)"; exit 1; fi
