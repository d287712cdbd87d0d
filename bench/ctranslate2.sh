#!/usr/bin/env bash
# tfm beside CTranslate2 decoding the same base model on the CPU, f32 and int8 (issue 19), in one command:
# both read the same weights and sources, their outputs are compared, and a table is printed.
#
# Usage: bench/ctranslate2.sh [--out DIR] [--batch 32] [--beams 4,1] [--threads 2] [--runs 2]
#                             [--warmup 1] [--precisions "f32 int8"]
#   --out   gets tfm.jsonl, ct2.jsonl, the outputs, the logs and table.md (default: a temporary folder)
#
# CTranslate2 here: the npm package `ctranslate2` (1.0.0), a Node.js binding of CTranslate2's C++
# library built with the crate ct2rs 0.9.18. It is the only build of CTranslate2 this machine can get
# (no PyPI; no Debian package). It multiplies with Ruy, f32 and int8 (its log says "SGEMM backend: Ruy",
# "GEMM_S8 backend: Ruy"), not with MKL or oneDNN as CTranslate2's PyPI wheels do on x86: it is not
# CTranslate2 at its best. Its binary needs glibc 2.38; Debian 12 has 2.36, so this script runs Node
# under Debian 13's libc6, libstdc++6 and libgcc-s1 (downloaded from deb.debian.org, checked against
# the release's signed SHA256 sums, unpacked in the cache, nothing installed). Cache: $TFM_BENCH_CACHE
# (default ~/.cache/tfm-bench).
#
# What runs:
#   1. tfm's bench_decode writes a random base model (vocab 32000) and 25-token sources (--model-dir)
#      and times tfm's decoding of them at each precision, --out-len 256, eos suppressed.
#   2. bench/ct2_convert.py writes the same weights as a CTranslate2 model (float32, and int8 as its
#      converter's `--quantization int8`), with </s> never chosen (--never-end).
#   3. bench/ct2_decode.js times CTranslate2 on the same sources, one batch, --threads threads.
# The binding cannot set CTranslate2's maximum output length, so it decodes its default 256 tokens a
# sentence, and tfm decodes 256 too (the suite's decoding rows are 25): the ratios are for 256-token
# outputs. The table counts the sentences whose outputs are the same in both.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

out="" batch=32 beams="4,1" threads=2 runs=2 warmup=1 precisions="f32 int8"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --beams) beams="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --precisions) precisions="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d'; exit 0 ;;
    *) echo "ctranslate2.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
# tfm's precision -> the CTranslate2 model's weights (bench/ct2_convert.py --quantization).
declare -A CT2_QUANTIZATION=([f32]=float32 [int8]=int8)
for precision in $precisions; do
  [[ -n "${CT2_QUANTIZATION[$precision]:-}" ]] ||
    { echo "ctranslate2.sh: --precisions $precision has no CTranslate2 counterpart (f32, int8)" >&2; exit 2; }
done
out="$(realpath -m "${out:-$(mktemp -d)}")"
mkdir -p "$out"
cd "$root"
bench_decode="$root/build/release/bench_decode"
[[ -x "$bench_decode" ]] || { echo "ctranslate2.sh: $bench_decode is missing (cmake --build --preset release)" >&2; exit 1; }
for tool in node npm curl xz dpkg-deb sha256sum gpgv; do
  command -v "$tool" >/dev/null || { echo "ctranslate2.sh: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
# The converter reads safetensors with tools/read_safetensors.py: PyTorch's interpreter
# (scripts/setup.sh --with-torch).
PYTHON="${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}"
"$PYTHON" -c "import numpy, torch" 2>/dev/null || { echo "ctranslate2.sh: $PYTHON has no numpy or torch (scripts/setup.sh --with-torch)" >&2; exit 1; }

CT2_PACKAGE="ctranslate2@1.0.0"
TRIXIE_PACKAGES=(libc6 libstdc++6 libgcc-s1)
OUT_LEN=256  # CTranslate2's default max_decoding_length, which the binding does not expose
SRC_LEN=25
cache="${TFM_BENCH_CACHE:-$HOME/.cache/tfm-bench}/ctranslate2"
mkdir -p "$cache"

# The binding: npm checks the tarball against the registry's integrity hash.
binding="$cache/package/ct2.linux-x64-gnu.node"
if [[ ! -f "$binding" ]]; then
  echo "ctranslate2.sh: fetching $CT2_PACKAGE from the npm registry" >&2
  (cd "$cache" && npm pack --silent "$CT2_PACKAGE" >/dev/null && tar xzf ctranslate2-*.tgz)
fi

# Debian 13's C and C++ runtime, for the binding's glibc 2.38 symbols.
runtime="$cache/trixie/usr/lib/x86_64-linux-gnu"
if [[ ! -x "$runtime/ld-linux-x86-64.so.2" ]]; then
  echo "ctranslate2.sh: fetching Debian 13's ${TRIXIE_PACKAGES[*]} (the binding needs glibc 2.38)" >&2
  mirror=http://deb.debian.org/debian
  curl -fsS -o "$cache/Packages.xz" "$mirror/dists/trixie/main/binary-amd64/Packages.xz"
  # The release file's signature is checked with Debian 12's archive keyring (which holds Debian 13's
  # keys), the Packages index against its SHA256 line, each package against the index's.
  curl -fsS -o "$cache/InRelease" "$mirror/dists/trixie/InRelease"
  gpgv --quiet --keyring /usr/share/keyrings/debian-archive-keyring.gpg --output "$cache/Release" \
    "$cache/InRelease"
  expected=$(awk '/^SHA256:/{s=1; next} /^[A-Za-z]/{s=0} s && $3 == "main/binary-amd64/Packages.xz" {print $1}' "$cache/Release")
  echo "$expected  $cache/Packages.xz" | sha256sum -c --quiet -
  for package in "${TRIXIE_PACKAGES[@]}"; do
    read -r file sum < <(xz -dc "$cache/Packages.xz" | awk -v p="$package" '
      /^Package: /{name=$2} /^Filename: /{file=$2} /^SHA256: /{sum=$2}
      /^$/{if (name == p) {print file, sum; exit}}')
    curl -fsS -o "$cache/$package.deb" "$mirror/$file"
    echo "$sum  $cache/$package.deb" | sha256sum -c --quiet -
    dpkg-deb -x "$cache/$package.deb" "$cache/trixie"
  done
fi
# CTranslate2 picks AVX2 for its own kernels on this Xeon unless told (its log: "Selected ISA"); its
# AVX-512 ones are built in, so they are asked for where the CPU has AVX-512, as a user tuning it would.
grep -qw avx512f /proc/cpuinfo && export CT2_FORCE_CPU_ISA=AVX512
ct2_node() {
  "$runtime/ld-linux-x86-64.so.2" --library-path "$runtime" "$(command -v node)" "$@"
}

# 1. tfm: the model, the sources and tfm's timings.
model="$out/model"
: >"$out/tfm.jsonl"
first=1
for precision in $precisions; do
  args=(--preset base --vocab 32000 --batch "$batch" --src-len "$SRC_LEN" --out-len "$OUT_LEN"
        --beams "$beams" --runs "$runs" --warmup "$warmup" --threads "$threads"
        --precision "$precision" --outputs "$out/tfm-$precision.json")
  [[ $first == 1 ]] && args+=(--model-dir "$model")
  first=0
  "$bench_decode" "${args[@]}" >>"$out/tfm.jsonl" 2>>"$out/tfm.log"
done
"$PYTHON" bench/ct2_convert.py --model "$model" --sources-out "$out/sources.txt"

# 2 and 3. CTranslate2 on the same weights and sources.
: >"$out/ct2.jsonl"
for precision in $precisions; do
  quantization="${CT2_QUANTIZATION[$precision]}"
  "$PYTHON" bench/ct2_convert.py --model "$model" --out "$out/ct2-$precision" \
    --quantization "$quantization" --never-end
  CT2_VERBOSE=1 ct2_node bench/ct2_decode.js "$binding" "$out/ct2-$precision" "$out/sources.txt" \
    --beams "$beams" --threads "$threads" --runs "$runs" --warmup "$warmup" --label "$precision" \
    --outputs "$out/ct2-$precision.json" >>"$out/ct2.jsonl" 2>>"$out/ct2.log"
  rm -rf "$out/ct2-$precision"
done
rm -rf "$model"

"$PYTHON" - "$out" "$precisions" <<'EOF' | tee "$out/table.md"
import json, os, sys
out, precisions = sys.argv[1], sys.argv[2].split()
def rows(path):
    return [json.loads(line) for line in open(path) if line.startswith("{")]
tfm = {r["mode"]: r for r in rows(os.path.join(out, "tfm.jsonl"))}
ct2 = {r["mode"]: r for r in rows(os.path.join(out, "ct2.jsonl"))}
print("| mode | tfm s a batch (best) | CTranslate2 s a batch (best) | tfm / CTranslate2 speed | same outputs |")
print("|---|---:|---:|---:|---:|")
for precision in precisions:
    tfm_out = json.load(open(os.path.join(out, f"tfm-{precision}.json")))
    ct2_out = json.load(open(os.path.join(out, f"ct2-{precision}.json")))
    for ct2_mode, c in ct2.items():
        if not ct2_mode.endswith("-" + precision):
            continue
        tfm_mode = ct2_mode[: -len(precision) - 1] + ("" if precision == "f32" else "-" + precision)
        t = tfm[tfm_mode]
        a, b = tfm_out[tfm_mode], ct2_out[ct2_mode]
        same = sum(x == y for x, y in zip(a, b))
        print(f"| {ct2_mode} | {t['seconds']:.3f} ({t['best_seconds']:.3f}) | "
              f"{c['seconds']:.3f} ({c['best_seconds']:.3f}) | {c['seconds'] / t['seconds']:.2f}x | "
              f"{same} of {len(b)} |")
EOF
