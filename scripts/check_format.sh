#!/usr/bin/env bash
# Checks that every tracked C++ and CUDA file (*.h, *.cc, *.cu, *.cuh) is formatted as the repository's .clang-format
# says, with clang-format 14 (Debian 12's `clang-format`, which scripts/setup.sh installs): other
# major versions format some constructs differently, so the check insists on 14 (CLANG_FORMAT
# names another binary). Lists the files that differ and exits 1; `clang-format -i FILE` fixes one.
set -euo pipefail
cd "$(dirname "$0")/.."

tool="${CLANG_FORMAT:-}"
if [ -z "$tool" ]; then
  tool=clang-format
  command -v clang-format-14 >/dev/null && tool=clang-format-14
fi
command -v "$tool" >/dev/null || { echo "check_format: $tool not found (scripts/setup.sh installs it)" >&2; exit 2; }
version="$("$tool" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')"
if [ "$version" != 14 ]; then
  echo "check_format: $tool is version ${version:-unknown}; the check needs clang-format 14 (Debian 12)" >&2
  exit 2
fi

# One run over every file; a file that differs is named in "FILE:LINE:COL: error: code should be
# clang-formatted".
status=0
output="$(git ls-files -z '*.h' '*.cc' '*.cu' '*.cuh' | xargs -0 "$tool" --style=file --dry-run -Werror 2>&1)" || status=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$output" | sort -u)
if [ "${#bad[@]}" -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) not formatted (clang-format -i FILE):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
if [ "$status" != 0 ]; then
  echo "check_format: $tool failed:" >&2
  echo "$output" | tail -20 >&2
  exit 1
fi
echo "check_format: $(git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | wc -l) files formatted (clang-format $version)"
