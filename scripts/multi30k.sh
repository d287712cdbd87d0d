#!/usr/bin/env bash
# The main job: Multi30k English -> German end to end on this machine. Learns the shared BPE
# vocabulary, trains configs/multi30k-en-de.yaml for a time budget, averages the last 5 checkpoints,
# translates test 2016 with beam 4 and scores it with sacreBLEU-style BLEU (detokenized, cased).
# Usage: scripts/multi30k.sh [minutes of training (default 5; the recipe's full budget is 60)] [run dir]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-5}"
run="${2:-runs/multi30k-en-de-${minutes}min}"
tfm=build/release/tfm
[ -x "$tfm" ] || { cmake --preset release -G Ninja >/dev/null && cmake --build --preset release; }
data="$(scripts/fetch_multi30k.sh)"
export TFM_DATA_DIR="$(dirname "$data")"

resume=""
[ -d "$run/checkpoints" ] && resume="--resume"
"$tfm" train -c configs/multi30k-en-de.yaml --run-dir "$run" --max-minutes "$minutes" $resume
"$tfm" average -c "$run/checkpoints" -n 5 -o "$run/averaged"
"$tfm" translate -m "$run/averaged" -i "$data/test_2016_flickr.en.gz" -o "$run/test_2016.hyp.de" \
  --beam-size 4 --alpha 0.6
zcat "$data/test_2016_flickr.de.gz" > "$run/test_2016.ref.de"
echo "== test 2016, English -> German, averaged model, beam 4:"
"$tfm" bleu --signature -r "$run/test_2016.ref.de" -i "$run/test_2016.hyp.de" | tee "$run/test_2016.bleu"
echo "== first translations:"
paste -d '\n' <(zcat "$data/test_2016_flickr.en.gz" | head -3) <(head -3 "$run/test_2016.hyp.de")
