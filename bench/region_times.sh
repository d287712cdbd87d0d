#!/usr/bin/env bash
# Where a decode's or a training step's wall time goes, by OpenMP parallel region: runs bench_decode
# (or bench_train_step) with bench/omp_region_times.c preloaded, which times every parallel region
# from the benchmark's mark on (bench/region_times_mark.h: after the start, the packing and the
# warm-up), and prints per decode (step) each region's function, its regions, its milliseconds and
# its share, and the time outside every region, where one thread runs alone (the search, the ops'
# bookkeeping). perf (bench/profile_step.sh) gives samples by function; this gives the wall time of
# each parallel part, its waits included, and the part of it its threads spend idle (outside the
# function: the fork, the join and the waits for the slowest thread, averaged over the threads).
#
# Usage: bench/region_times.sh decode [bench_decode options]   (one beam size)
#          default: --preset base --vocab 32000 --batch 32 --src-len 25 --out-len 25 --beams 1
#                   --precision f32 --threads 2
#        bench/region_times.sh train [bench_train_step options]
#          default: --preset base --batch 128 --src-len 32 --tgt-len 32 --precision f32
# Environment: BUILD (build/release), RUNS (5: timed decodes or steps). Needs gcc and addr2line
# (binutils); a recipe needs TFM_DATA_DIR set.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD="${BUILD:-build/release}"
RUNS="${RUNS:-5}"
die() { echo "region_times.sh: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: bench/region_times.sh decode|train [options]"
kind="$1"
shift
case "$kind" in
  decode)
    binary="$BUILD/bench_decode"
    [ $# -gt 0 ] || set -- --preset base --vocab 32000 --batch 32 --src-len 25 --out-len 25 \
      --beams 1 --precision f32 --threads 2
    count_flag=--runs
    ;;
  train)
    binary="$BUILD/bench_train_step"
    [ $# -gt 0 ] || set -- --preset base --batch 128 --src-len 32 --tgt-len 32 --precision f32
    count_flag=--steps
    ;;
  *) die "the first argument is decode or train, not '$kind'" ;;
esac
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS=$RUNS is not a positive whole number"
previous=""
for arg in "$@"; do  # the mark restarts with each beam size: the figures would be the last one's
  [[ "$previous" == --beams && "$arg" == *,* ]] && die "one beam size at a time, not --beams $arg"
  [[ "$arg" == --beams=*,* ]] && die "one beam size at a time, not $arg"
  previous="$arg"
done
[ -x "$binary" ] || die "$binary is missing (build it first)"
command -v addr2line > /dev/null || die "needs addr2line (apt-get install binutils)"

shim="$BUILD/omp_region_times.so"
if [ ! -f "$shim" ] || [ bench/omp_region_times.c -nt "$shim" ]; then
  gcc -O2 -shared -fPIC -Wall -Werror -o "$shim" bench/omp_region_times.c -ldl ||
    die "could not build $shim"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
TFM_REGION_TIMES="$work/regions.txt" LD_PRELOAD="$(realpath "$shim")" \
  "$binary" "$@" "$count_flag" "$RUNS" --warmup 1 > "$work/out.json" 2> "$work/err.txt" ||
  { echo "region_times.sh: $binary failed:" >&2; tail -n 5 "$work/err.txt" >&2; exit 1; }
[ -s "$work/regions.txt" ] || die "no region times were written (is $binary linked with libgomp?)"

python3 - "$work/regions.txt" "$RUNS" "$kind" << 'EOF_PY'
import subprocess
import sys

path, runs, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
unit = "decode" if kind == "decode" else "step"


def read(path):
    with open(path) as f:
        _, span, _, inside = f.readline().split()
        regions = {}
        for line in f:
            calls, seconds, idle, obj, offset = line.split()
            regions[(obj, offset)] = (int(calls), float(seconds), float(idle))
    return float(span), float(inside), regions


def name_of(obj, offset):
    out = subprocess.run(["addr2line", "-f", "-C", "-e", obj, offset], capture_output=True,
                         text=True).stdout.split("\n")[0]
    library = obj.rsplit("/", 1)[-1]
    if "libdnnl" in library:
        return "oneDNN's products (" + library + ")"
    if not out or out.startswith("??") or "tfm::" not in out:
        return library  # another library's region: its nearest exported name would mislead
    name = out.replace("(anonymous namespace)::", "").split("(")[0]
    name = name.removeprefix("void ").replace("tfm::internal::", "")
    for isa in ("avx512_bf16::", "avx512::", "avx2::", "x86_64_v2::"):
        name = name.replace("cpu::" + isa, "cpu::")
    if name.count("<") > name.count(">"):  # cut inside a template argument (a lambda's type)
        name += "...>"
    return name


span, inside, regions = read(path)
span, serial = span / runs, (span - inside) / runs
rows = {}
for key, (calls, seconds, idle) in regions.items():
    name = name_of(*key)
    c, s, i = rows.get(name, (0.0, 0.0, 0.0))
    rows[name] = (c + calls / runs, s + seconds / runs, i + idle / runs)
rows["outside every parallel region (one thread)"] = (0.0, serial, None)
print(f"| part of a {unit} | regions a {unit} | ms a {unit} | share | of which idle, ms |")
print("|---|---:|---:|---:|---:|")
for name, (calls, seconds, idle) in sorted(rows.items(), key=lambda item: -item[1][1]):
    if seconds * 1000 < 0.05:
        continue
    idle_cell = "" if idle is None else f"{idle * 1000:.1f}"
    print(f"| {name} | {calls:.0f} | {seconds * 1000:.1f} | {100 * seconds / span:.1f}% | {idle_cell} |")
total_idle = sum(i for _, _, i in rows.values() if i is not None)
print(f"| all | | {span * 1000:.1f} | 100% | {total_idle * 1000:.1f} |")
EOF_PY
