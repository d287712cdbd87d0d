# Sourced by the CTranslate2 bench scripts. `ct2_present NAME BUILD_DIR` returns when CTranslate2's
# Python module imports from BUILD_DIR, and ends the script with status 0 when it does not
# (bench/ct2_common.py prints the one line that says why). Needs $PYTHON, run from the project root.
ct2_present() {
  local status=0
  "$PYTHON" -c 'import sys; sys.path.insert(0, "bench"); import ct2_common
sys.exit(0 if ct2_common.import_ctranslate2(sys.argv[2], sys.argv[1]) else 3)' "$1" "$2" || status=$?
  [[ $status == 3 ]] && exit 0
  [[ $status == 0 ]] || exit "$status"
}

# `ct2_force_isa ISA` prints the CT2_FORCE_CPU_ISA for a script's `--ct2-isa ISA`: ISA as given;
# for none, AVX512 where the CPU has AVX-512 (CTranslate2's fastest kernels, which it takes only
# when told); for "own", nothing (CTranslate2's own choice).
ct2_force_isa() {
  case "$1" in
    own) ;;
    "") if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then echo AVX512; fi ;;
    *) echo "$1" ;;
  esac
}
