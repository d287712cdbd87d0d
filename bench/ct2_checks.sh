#!/usr/bin/env bash
# Issue 45's checks in CTranslate2 itself (built from its sources by scripts/build_ctranslate2.sh),
# on the fixtures of tools/make_convert_fixtures.py (tests/fixtures/convert):
#   1. bench/ct2_roundtrip.py on each converted fixture (Marian post-norm and pre-norm, Hugging Face
#      MarianMT, fairseq post-norm and pre-norm): tfm -> `tfm convert --to ctranslate2` -> the same
#      outputs in CTranslate2 (f32 identical; int8 beside CTranslate2's agreement with itself);
#   2. bench/ct2_marian.py: CTranslate2's own OPUS-MT converter against `tfm convert --from marian`.
#
# Usage: bench/ct2_checks.sh [--ct2 BUILD_DIR]     (default $CT2_BUILD; absent: one line, status 0)
# Environment: PYTHON (/usr/bin/python3), PYTHONPATH (build/release/python), TFM (build/release/tfm).
# Exit status: 1 when a check fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
ct2="${CT2_BUILD:-}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ct2) ct2="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d'; exit 0 ;;
    *) echo "ct2_checks.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
cd "$root"
PYTHON="${PYTHON:-/usr/bin/python3}"
TFM="${TFM:-$root/build/release/tfm}"
export PYTHONPATH="${PYTHONPATH:-$root/build/release/python}"
# CTranslate2 present? Else one line and status 0.
source bench/ct2_present.sh
ct2_present ct2_checks.sh "$ct2"
[[ -x "$TFM" ]] || { echo "ct2_checks.sh: $TFM is missing (cmake --build --preset release)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fixtures=tests/fixtures/convert
printf '%s\n' "the cat sat on the mat" "a dog ran in the park" "we translate small sentences" \
  "models from other toolkits" "the dog sat in the park" "small models" "der hund lief im park" \
  "we" >"$tmp/input.txt"

failed=0
for entry in marian:marian marian_prenorm:marian huggingface:huggingface \
             fairseq_staged:tfm-names fairseq_prenorm_staged:tfm-names; do
  name="${entry%%:*}" from="${entry#*:}"
  "$TFM" convert --from "$from" -i "$fixtures/$name" -o "$tmp/$name" >/dev/null
  "$PYTHON" bench/ct2_roundtrip.py --model "$tmp/$name" --input "$tmp/input.txt" --tfm "$TFM" \
    --ct2 "$ct2" || failed=1
done
"$PYTHON" bench/ct2_marian.py --fixtures "$fixtures" --tfm "$TFM" --ct2 "$ct2" || failed=1
exit "$failed"
