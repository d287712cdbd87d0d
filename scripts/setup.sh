#!/usr/bin/env bash
# Installs every Debian package tfm needs to build, test and run (idempotent) and the browser test's
# npm package (tests/browser), then builds the release preset.
# Usage: scripts/setup.sh [--with-torch] [--no-build]
#   --with-torch  also installs python3-torch, needed only for tools/ (reference fixtures) and the
#                 PyTorch side of bench/; the build and the tests never need it.
set -euo pipefail
cd "$(dirname "$0")/.."

with_torch=0
build=1
for arg in "$@"; do
  case "$arg" in
    --with-torch) with_torch=1 ;;
    --no-build) build=0 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config clang-format
  ccache                 # scripts/test.sh compiles through it: a clean clone reuses the machine's objects
  libgtest-dev libbenchmark-dev
  libdnnl-dev            # oneDNN: CPU matrix products (f32, bf16)
  ocl-icd-opencl-dev     # oneDNN's CMake config looks for OpenCL; Debian only "recommends" it
  libsentencepiece-dev   # subword vocabulary
  nlohmann-json3-dev     # config.json, safetensors headers
  libcli11-dev           # command line
  libfmt-dev libspdlog-dev
  libyaml-cpp-dev        # training recipes
  zlib1g-dev             # gzipped corpora
  libminizip-dev         # tfm convert: Marian's .npz models are zip archives (zlib's minizip)
  libicu-dev             # Unicode properties and lower-casing (BLEU's intl tokenizer)
  libopenmpi-dev openmpi-bin  # MPI for data-parallel training over several processes (mpirun)
  iproute2               # `ip`: the network-namespace script that runs ranks over a real TCP link
  python3 python3-numpy
  python3-dev pybind11-dev  # the Python module (python/): Python's headers and pybind11
  python3-pytest         # the Python module's tests (python/tests)
  python3-setuptools python3-wheel  # the module's wheel: python/setup.py drives the CMake build
  python3-pip python3-venv  # building the wheel (pip wheel) and its test in a fresh venv
  dpkg-dev file          # the .deb: CPack's DEB generator runs dpkg-shlibdeps (dpkg-dev), which needs file
  curl ca-certificates   # scripts/fetch_multi30k.sh downloads Multi30k over https when no copy is found
  chromium nodejs        # the browser test of `tfm attention`'s page (tests/browser, headless)
  fonts-dejavu-core      # a font for its screenshots (a minimal root has none)
  libcpp-httplib-dev     # tfm serve: HTTP server (and the tests' client)
  prometheus-cpp-dev     # tfm serve: /metrics in the Prometheus text format
  wrk                    # bench/serve.sh: HTTP load generator
  qemu-user              # the CPU dispatch test runs tfm on an emulated older CPU (qemu-x86_64 -cpu)
)
# npm installs the browser test's driver (playwright-core). Debian's nodejs comes without it, in the
# npm package; NodeSource's nodejs bundles it and conflicts with that package, so it is asked for
# only where no npm command exists.
command -v npm >/dev/null || packages+=(npm)
if [ "$with_torch" = 1 ]; then
  # OpenBLAS: without it Debian's PyTorch runs f32 matrix products on the reference BLAS, about 100x
  # slower than an optimised one.
  packages+=(python3-torch libgoogle-perftools4 libopenblas0-openmp)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The browser test's npm package, as package-lock.json pins it; again only when it changed.
browser=tests/browser
locked="$(node -p "require('./$browser/package-lock.json').packages['node_modules/playwright-core'].version")"
installed="$(node -p "require('./$browser/node_modules/playwright-core/package.json').version" 2>/dev/null || true)"
if [ "$installed" != "$locked" ]; then
  echo "setup.sh: npm ci in $browser (playwright-core $locked)"
  if ! (cd "$browser" && npm ci --no-audit --no-fund --loglevel=error); then
    echo "setup.sh: npm ci in $browser failed (is the npm registry reachable?); the browser test" \
         "(ctest -R Browser) needs its node_modules" >&2
    exit 1
  fi
fi

if [ "$build" = 1 ]; then
  source scripts/ccache_env.sh
  cmake --preset release -G Ninja >/dev/null
  cmake --build --preset release
  ccache_report
fi
