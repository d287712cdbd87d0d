# Sourced by scripts/setup.sh and scripts/test.sh (from the repository's root): compile through ccache
# where it is installed (scripts/setup.sh installs it; TFM_CCACHE=0 turns it off). Objects are kept in
# the machine's cache directory (~/.cache/ccache), shared by every checkout on the machine, so a clean
# clone (CI's) reuses what a developer's build compiled. Only a build folder's first configuration
# takes the launcher (CMake reads CMAKE_<LANG>_COMPILER_LAUNCHER from the environment then).
# ccache_report prints how many objects the build since sourcing reused and compiled.
tfm_ccache=0
if [ "${TFM_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  tfm_ccache=1
  # Paths in the hash relative to this checkout, and the build folder's path left out, so that any
  # clone hits; what -march=native means on this CPU goes into the hash, so that a cache carried to
  # another CPU does not hand out objects with instructions that CPU lacks.
  mkdir -p build
  "${CXX:-c++}" -march=native -Q --help=target >build/ccache-native-target.txt 2>/dev/null || true
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_EXTRAFILES="$PWD/build/ccache-native-target.txt"
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CMAKE_CUDA_COMPILER_LAUNCHER=ccache
fi

tfm_ccache_count() {
  ccache --print-stats | awk -v keys="$1" 'BEGIN { split(keys, k, ","); for (i in k) want[k[i]] = 1 }
                                            $1 in want { n += $2 } END { print n + 0 }'
}
if [ "$tfm_ccache" = 1 ]; then
  tfm_ccache_hits="$(tfm_ccache_count direct_cache_hit,preprocessed_cache_hit)"
  tfm_ccache_misses="$(tfm_ccache_count cache_miss)"
fi
ccache_report() {
  [ "$tfm_ccache" = 1 ] || return 0
  echo "ccache: $(($(tfm_ccache_count direct_cache_hit,preprocessed_cache_hit) - tfm_ccache_hits))" \
       "objects reused, $(($(tfm_ccache_count cache_miss) - tfm_ccache_misses)) compiled"
}
