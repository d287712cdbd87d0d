#!/usr/bin/env bash
# Builds CTranslate2 v4.8.1 from its public sources, CPU only (oneDNN products, GNU OpenMP), with its
# Python module, as tfm's decoding peer in bench/ (bench/ctranslate2.sh, bench/ct2_roundtrip.py,
# bench/ct2_marian.py, bench/opus_mt_speed.sh). Debian 12; packages from Debian only (no PyPI).
#
# Usage: scripts/build_ctranslate2.sh SRC_DIR BUILD_DIR [--jobs 2]
#   SRC_DIR    a checkout (or `git archive` snapshot) of OpenNMT/CTranslate2 at v4.8.1, outside this
#              repository; it is read, never changed (submodule folders may be empty)
#   BUILD_DIR  gets source/ (a patched copy of SRC_DIR), cmake/ (the build), install/ (the library,
#              lib/libctranslate2.so, and the Python package, install/python/ctranslate2)
#   --jobs     parallel compile jobs (default 2); everything runs under `nice -n 19`
#
# Then: bench scripts take `--ct2 BUILD_DIR` (or CT2_BUILD=BUILD_DIR); Python itself takes
# PYTHONPATH=BUILD_DIR/install/python (printed at the end).
#
# What it changes in CTranslate2 (scripts/ctranslate2-debian12.patch, applied to the copy):
# spdlog and cpu_features come from Debian's packages through find_package instead of the git
# submodules, and Conv1D's oneDNN branch (oneDNN 3's API) is left out with Debian's oneDNN 2.6.
# Configuration: WITH_MKL=OFF WITH_DNNL=ON OPENMP_RUNTIME=COMP (libgomp, as Debian's oneDNN),
# ENABLE_CPU_DISPATCH=ON (its kernels for AVX, AVX2 and AVX-512, chosen at run time), no CLI
# (its cxxopts submodule), no tests. The Python module is built from python/ with Debian's
# setuptools and pybind11 (python3-pybind11), linked to install/lib with an rpath.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# Debian's interpreter (its setuptools, pybind11, numpy): not another python3 first on PATH.
PYTHON="${PYTHON:-/usr/bin/python3}"
patch_file="$root/scripts/ctranslate2-debian12.patch"
VERSION=4.8.1

usage() { sed -n '2,/^set /p' "$0" | sed '$d'; }
[[ $# -ge 2 && "$1" != -* && "$2" != -* ]] || { usage >&2; exit 2; }
src="$(realpath -m "$1")" build="$(realpath -m "$2")"
shift 2
jobs=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build_ctranslate2.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
version_file="$src/python/ctranslate2/version.py"
[[ -f "$src/CMakeLists.txt" && -f "$version_file" ]] ||
  { echo "build_ctranslate2.sh: $src is not a CTranslate2 source tree (no CMakeLists.txt, python/ctranslate2/version.py)" >&2; exit 1; }
found="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$version_file")"
[[ "$found" == "$VERSION" ]] ||
  { echo "build_ctranslate2.sh: $version_file says $found; this script and its patch are for $VERSION" >&2; exit 1; }
case "$build/" in "$root"/*)
  echo "build_ctranslate2.sh: BUILD_DIR $build is inside the repository; build outside it" >&2; exit 1 ;;
esac

# Debian's packages (as scripts/setup.sh installs: only the missing ones, apt-get as root or sudo).
packages=(
  build-essential cmake ninja-build patch
  libdnnl-dev                  # oneDNN 2.6: f32 and int8 products (dnnl_sgemm, dnnl_gemm_u8s8s32)
  libspdlog-dev libfmt-dev     # its logging (spdlog with the external fmt)
  libcpu-features-dev          # cpuid, for its kernels' dispatch
  python3-dev python3-setuptools python3-pybind11 pybind11-dev  # the Python module
  python3-numpy python3-yaml   # the Python package's own imports; the Marian/OPUS-MT converter
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "build_ctranslate2.sh: installing ${missing[*]}"
  sudo_cmd=""
  [[ "$(id -u)" == 0 ]] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# A patched copy of the sources, made again only when the sources or the patch changed.
stamp="$( (cd "$src" && find . -path ./.git -prune -o -type f -printf '%P %s %T@\n' | sort;
           sha256sum "$patch_file") | sha256sum | cut -c1-16)"
copy="$build/source"
if [[ "$(cat "$copy/.tfm-build-stamp" 2>/dev/null)" != "$stamp" ]]; then
  rm -rf "$copy"
  mkdir -p "$copy"
  tar -C "$src" --exclude=./.git -cf - . | tar -C "$copy" -xf -
  patch -p1 -s -d "$copy" <"$patch_file"
  echo "$stamp" >"$copy/.tfm-build-stamp"
fi

prefix="$build/install"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
nice -n 19 cmake -S "$copy" -B "$build/cmake" -G Ninja "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
  -DWITH_MKL=OFF -DWITH_DNNL=ON -DOPENMP_RUNTIME=COMP -DENABLE_CPU_DISPATCH=ON \
  -DBUILD_CLI=OFF -DBUILD_TESTS=OFF >"$build/cmake.log"
nice -n 19 cmake --build "$build/cmake" -j "$jobs"
nice -n 19 cmake --install "$build/cmake" >/dev/null

# The Python module: setup.py finds the library and headers through CTRANSLATE2_ROOT; LDFLAGS adds
# the rpath to install/lib (distutils appends LDFLAGS to its link line).
(cd "$copy/python" &&
  CTRANSLATE2_ROOT="$prefix" LDFLAGS="-Wl,-rpath,$prefix/lib" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
    nice -n 19 "$PYTHON" setup.py -q build --build-base "$build/python-build" >"$build/python-build.log")
rm -rf "$prefix/python"
mkdir -p "$prefix/python"
cp -r "$build"/python-build/lib*/ctranslate2 "$prefix/python/"

PYTHONPATH="$prefix/python" "$PYTHON" -c '
import ctranslate2
print(f"build_ctranslate2.sh: CTranslate2 {ctranslate2.__version__} built; CPU compute types:",
      ", ".join(sorted(ctranslate2.get_supported_compute_types("cpu"))))'
echo "build_ctranslate2.sh: bench scripts: --ct2 $build (or CT2_BUILD=$build)"
echo "export PYTHONPATH=$prefix/python"
