#!/usr/bin/env bash
# The longest functions of some source files, by clang-tidy's readability-function-size: the lines
# of a function from its opening to its closing brace (comments and blank lines included; a lambda's
# lines count in the function that holds it). Needs a configured build (compile_commands.json).
# Usage: scripts/function_sizes.sh [BUILD] [COUNT] [FILES...]
#   e.g. scripts/function_sizes.sh build/release 8 src/tfm/train/*.cc   (the defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
count="${2:-8}"
shift $(($# > 2 ? 2 : $#))
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(src/tfm/train/*.cc)
tidy="$(command -v clang-tidy-14 || command -v clang-tidy)"
for f in "${files[@]}"; do
  "$tidy" -p "$build" --quiet -checks='-*,readability-function-size' \
    -config="{CheckOptions: [{key: readability-function-size.LineThreshold, value: 1}]}" "$f" 2>/dev/null |
    grep -E "warning: function|note: [0-9]+ lines including" |
    sed -E "s/.*warning: function '([^']*)'.*/NAME \1/; s/.*note: ([0-9]+) lines including.*/LINES \1/" |
    awk -v file="$(basename "$f")" '$1=="NAME"{name=$2} $1=="LINES"{print $2, file, name}'
done | sort -rn | head -"$count"
