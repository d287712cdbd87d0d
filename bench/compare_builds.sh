#!/usr/bin/env bash
# bench/compare_builds.sh: bench/suite.sh's tfm figures for two builds of tfm, side by side in one run.
#
#   bench/compare_builds.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]
#
# Runs bench/suite.sh with PYTORCH=0 (tfm rows only) ROUNDS times (default 2) for each build,
# alternating (before, after, after, before, ...) so that slow drift of a noisy machine hits both
# alike, then prints, per figure, the median of each build, the after/before ratio and the spread
# (min-max) of the runs. BUILD_A / BUILD_B are build folders holding gemm_bench, bench_train_step
# and bench_decode (e.g. a worktree of the older commit built with the release preset). The suite's
# environment overrides (PARTS, THREADS, ...) pass through. Keep the machine quiet while it runs.
set -euo pipefail
if (($# < 2)); then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
before="$(realpath "$1")" after="$(realpath "$2")" rounds="${3:-2}"
cd "$(dirname "$0")/.."
out="$(mktemp -d /tmp/tfm-compare-XXXXXX)"
order=()
for ((i = 0; i < rounds; i++)); do
  if ((i % 2 == 0)); then order+=(before after); else order+=(after before); fi
done
n=0
for which in "${order[@]}"; do
  n=$((n + 1))
  build="$before"
  [[ "$which" == after ]] && build="$after"
  echo "== compare_builds: run $n of ${#order[@]}: $which ($build)" >&2
  BUILD="$build" PYTORCH=0 OUT="$out/$which-$n.jsonl" bench/suite.sh >"$out/$which-$n.table" 2>"$out/$which-$n.log"
done
python3 bench/compare_table.py "$out"/before-*.jsonl -- "$out"/after-*.jsonl
echo "(runs kept in $out)"
