#!/usr/bin/env bash
# Prints a sha256 over the files that define tfm's set-up: the scripts that the README's two commands
# run, the CMake files, the wheel's build files (python/pyproject.toml, python/setup.py), CI's entry
# point, the fresh-machine check itself and the text of the README's two commands (only the commands,
# so that editing the README's prose changes nothing).
# .ci/run compares it with .ci/fresh-machine.stamp to decide whether to run scripts/check_fresh_machine.sh.
# Usage: scripts/setup_fingerprint.sh              the fingerprint (64 hex digits)
#        scripts/setup_fingerprint.sh --files      each input with its own sha256
#        scripts/setup_fingerprint.sh --commands   the README's two commands, one a line
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

# The README's two commands: every line of the ```sh blocks under "## Two commands", main job first.
readme_commands() {
  [ -f README.md ] || { echo "setup_fingerprint.sh: no README.md" >&2; return 1; }
  local commands
  commands="$(awk '
    /^## / { in_section = ($0 ~ /^## Two commands[[:space:]]*$/); in_block = 0; next }
    !in_section { next }
    /^```/ { if (in_block) in_block = 0; else if ($0 ~ /^```(sh|bash|shell)[[:space:]]*$/) in_block = 1; next }
    in_block && $0 !~ /^[[:space:]]*(#|$)/ { print }
  ' README.md)"
  if [ "$(printf '%s\n' "$commands" | grep -c .)" != 2 ]; then
    echo "setup_fingerprint.sh: expected two commands in README.md's \"## Two commands\" \`\`\`sh blocks, found:" >&2
    printf '%s\n' "$commands" >&2
    return 1
  fi
  printf '%s\n' "$commands"
}

inputs() {
  local f
  for f in scripts/setup.sh scripts/test.sh scripts/multi30k.sh scripts/fetch_multi30k.sh \
           scripts/prepare_multi30k.sh scripts/check_fresh_machine.sh scripts/setup_fingerprint.sh \
           scripts/ccache_env.sh CMakeLists.txt CMakePresets.json .ci/run tests/browser/package.json \
           tests/browser/package-lock.json python/pyproject.toml python/setup.py; do
    echo "$f"
  done
  if [ -d cmake ]; then find cmake -type f | LC_ALL=C sort; fi
}

# One line per input: its sha256 (or "missing"), "x" when executable, its path.
listing() {
  local f sum
  while IFS= read -r f; do
    if [ -f "$f" ]; then
      sum="$(sha256sum < "$f" | cut -d' ' -f1)"
      if [ -x "$f" ]; then echo "$sum x $f"; else echo "$sum - $f"; fi
    else
      echo "missing - $f"
    fi
  done < <(inputs)
  local commands
  commands="$(readme_commands)"
  sum="$(printf '%s\n' "$commands" | sha256sum | cut -d' ' -f1)"
  echo "$sum - README.md#two-commands"
}

case "${1:-}" in
  "") text="$(listing)"; printf '%s\n' "$text" | sha256sum | cut -d' ' -f1 ;;
  --files) text="$(listing)"; printf '%s\n' "$text" ;;
  --commands) readme_commands ;;
  -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "setup_fingerprint.sh: unknown option $1" >&2; exit 2 ;;
esac
