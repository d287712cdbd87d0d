#!/usr/bin/env bash
# The CTest test Package.DebInstallsTheProgramLibraryAndModule (docs/PACKAGING.md): builds the .deb
# of this build tree with cpack (cmake/packaging.cmake), then checks
#   - its name, tfm_<version>-1_<arch>.deb, and its fields: every shared library that its `tfm` and
#     Python module load is in Depends through the package that owns it here (dpkg-shlibdeps), a
#     library that no package owns (a CUDA toolkit outside apt) being named; every package in
#     Depends is installed here; the Python the module was built for;
#   - its files: /usr/bin/tfm, the public headers, libtfm, the CMake package, the Python module;
#   - what they do, unpacked with `dpkg -x` into a scratch root: `tfm --version` and `tfm info`;
#     an outside CMake project (tests/consumer) finds the package there with find_package(tfm),
#     builds and runs; the module, imported from there alone, trains a tiny model and translates
#     as the package's `tfm` does (python/tests/installed_check.py).
# Installing it for real (apt-get install ./tfm_*.deb, into /usr) is scripts/check_fresh_machine.sh's
# step `deb`, in a fresh Debian 12 root.
# Usage: deb_test.sh --build DIR --source DIR --cpack CPACK --generator G --cxx CXX [--python PY]
# --python empty or absent: the build has no Python module (the .deb must then have none).
set -euo pipefail
shopt -s inherit_errexit
# A command that fails without a message of ours still says which it was (the work folder is kept).
trap 'echo "deb_test.sh: line $LINENO: \"$BASH_COMMAND\" failed (status $?); see ${work:-the build tree}" >&2' ERR

fail() { echo "deb_test.sh: $*" >&2; exit 1; }
build="" source="" cpack="" generator="" cxx="" python=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || fail "$1 needs a value"
  case "$1" in
    --build) build="$2" ;;
    --source) source="$2" ;;
    --cpack) cpack="$2" ;;
    --generator) generator="$2" ;;
    --cxx) cxx="$2" ;;
    --python) python="$2" ;;
    *) fail "unknown option $1" ;;
  esac
  shift 2
done
[ -n "$build" ] && [ -n "$source" ] && [ -n "$cpack" ] && [ -n "$generator" ] && [ -n "$cxx" ] \
  || fail "usage: deb_test.sh --build DIR --source DIR --cpack CPACK --generator G --cxx CXX [--python PY]"
build="$(cd "$build" && pwd)"
source="$(cd "$source" && pwd)"
# What CPack's DEB generator needs for Depends, and what this test reads the package with.
for tool in dpkg-shlibdeps file dpkg-deb dpkg-query readelf ldd; do
  command -v "$tool" >/dev/null \
    || fail "needs $tool (dpkg-dev, file, binutils: scripts/setup.sh installs them)"
done

work="$build/deb-test"
rm -rf "$work"
mkdir -p "$work"
start=$SECONDS
"$cpack" --config "$build/CPackConfig.cmake" -B "$work/out" > "$work/cpack.log" 2>&1 \
  || { cat "$work/cpack.log" >&2; fail "cpack failed"; }
version="$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")"
arch="$(dpkg --print-architecture)"
debs=("$work"/out/*.deb)
[ "${#debs[@]}" = 1 ] && [ "$(basename "${debs[0]}")" = "tfm_${version}-1_${arch}.deb" ] \
  || fail "expected the one package tfm_${version}-1_${arch}.deb, found: ${debs[*]##*/}"
deb="${debs[0]}"
echo "built $(basename "$deb") ($(($(stat -c %s "$deb") / 1024)) KiB) in $((SECONDS - start)) s"
dpkg-deb -f "$deb" Package Version Architecture Depends Suggests
[ "$(dpkg-deb -f "$deb" Package)" = tfm ] || fail "Package is not tfm"
[ "$(dpkg-deb -f "$deb" Version)" = "${version}-1" ] || fail "Version is not ${version}-1"
depends="$(dpkg-deb -f "$deb" Depends)"

# The files.
# One path a line (a link's own path, not its target's).
dpkg-deb -c "$deb" | awk '{ path = $NF; for (i = 6; i < NF; i++) if ($(i + 1) == "->") path = $i; print path }' \
  | sed 's|^\./|/|' > "$work/contents"
expect_file() {  # expect_file REGEX WHAT
  grep -Eq "$1" "$work/contents" || fail "the package has no $2 ($1); it has:$(printf ' %s' $(cat "$work/contents"))"
}
expect_file '^/usr/bin/tfm$' "tfm program"
expect_file '^/usr/include/tfm/tfm\.h$' "public header tfm.h"
expect_file '^/usr/include/tfm/version\.h$' "generated version.h"
expect_file '^/usr/lib/([^/]+/)?libtfm\.(a|so)$' "libtfm"
expect_file '^/usr/lib/([^/]+/)?cmake/tfm/tfmConfig\.cmake$' "CMake package"
module_files="$(grep -E '^/usr/lib/python3/dist-packages/tfm/' "$work/contents" || true)"
if [ -n "$python" ]; then
  expect_file '^/usr/lib/python3/dist-packages/tfm/__init__\.py$' "Python package"
  expect_file '^/usr/lib/python3/dist-packages/tfm/_tfm\..*\.so$' "Python extension"
  echo "$depends" | grep -Eq '(^|, )python3 \(>= [0-9]+\.[0-9]+~\)' \
    || fail "Depends has no python3 (>= X.Y~) for the module: $depends"
elif [ -n "$module_files" ]; then
  fail "the build has no Python module, but the package has: $module_files"
fi

# Depends. Every package named is installed here (so the names are real ones), and every shared
# library that the program and the module load is owned by one of them.
dpkg-deb -x "$deb" "$work/root"
root="$work/root"
libdir="$root$(dirname "$(grep -Em1 '^/usr/lib/([^/]+/)?libtfm\.(a|so)$' "$work/contents")")"
depend_names=()
IFS=',' read -ra clauses <<< "$depends"
for clause in "${clauses[@]}"; do
  ok=0
  IFS='|' read -ra alternatives <<< "$clause"
  for alternative in "${alternatives[@]}"; do
    name="$(echo "$alternative" | sed 's/(.*)//; s/[[:space:]]//g')"
    depend_names+=("$name")
    if dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed"; then
      ok=1
    fi
  done
  [ "$ok" = 1 ] || fail "Depends names $clause, which is not installed here"
done
binaries=("$root/usr/bin/tfm")
[ -z "$python" ] || binaries+=("$root"/usr/lib/python3/dist-packages/tfm/_tfm.*.so)
unowned=()
for binary in "${binaries[@]}"; do
  # Its own NEEDED entries (those of the libraries they load are their packages' business), each
  # where the loader finds it.
  # A shared libtfm is found in the unpacked root, where the package put it.
  LD_LIBRARY_PATH="$libdir" ldd "$binary" | awk '/=>/ { print $1, $3 }' > "$work/ldd"
  while read -r soname; do
    case "$soname" in ld-linux*) continue ;; esac
    path="$(awk -v s="$soname" '$1 == s { print $2 }' "$work/ldd")"
    [ -n "$path" ] && [ "$path" != "not" ] || fail "${binary#$root} needs $soname, which is not found"
    case "$path" in "$root"/*) continue ;; esac  # the package's own (libtfm.so)
    owner="$(dpkg-query -S "$path" 2>/dev/null || dpkg-query -S "$(realpath "$path")" 2>/dev/null || true)"
    if [ -z "$owner" ]; then
      unowned+=("$soname")
      continue
    fi
    package="${owner%%:*}"
    printf '%s\n' "${depend_names[@]}" | grep -qxF "$package" \
      || fail "${binary#$root} loads $soname from $package, which is not in Depends: $depends"
  done < <(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
done
if [ "${#unowned[@]}" -gt 0 ]; then
  echo "loaded from no package (not in Depends, needed where the package is installed):" \
       "$(printf '%s\n' "${unowned[@]}" | sort -u | tr '\n' ' ')"
fi

# The program, from the unpacked root.
[ "$("$root/usr/bin/tfm" --version)" = "tfm $version" ] || fail "tfm --version is not 'tfm $version'"
"$root/usr/bin/tfm" info --preset base --vocab 37000 > "$work/info"
grep -q "63,045,632" "$work/info" || { cat "$work/info" >&2; fail "tfm info --preset base has not 63,045,632 parameters"; }
echo "tfm --version: $("$root/usr/bin/tfm" --version); tfm info --preset base --vocab 37000: 63,045,632 parameters"

# The library, headers and CMake package: an outside project against the unpacked /usr.
cmake="$(dirname "$cpack")/cmake"
"$cmake" -S "$source/tests/consumer" -B "$work/consumer" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
      > "$work/consumer.log" 2>&1 \
  && "$cmake" --build "$work/consumer" >> "$work/consumer.log" 2>&1 \
  || { cat "$work/consumer.log" >&2; fail "tests/consumer does not build against the package's CMake package"; }
grep -q "^tfm_DIR:PATH=$root/usr/lib/" "$work/consumer/CMakeCache.txt" \
  || fail "tests/consumer found tfm elsewhere: $(grep tfm_DIR "$work/consumer/CMakeCache.txt")"
consumer_out="$(LD_LIBRARY_PATH="$libdir" "$work/consumer/consumer" "$source/tests/fixtures/tiny" 2>&1 || true)"
echo "$consumer_out" | grep -q "vocab.model: missing" || fail "the consumer failed: $consumer_out"
echo "tests/consumer: found the package's tfm::tfm, built and ran"

# The Python module, from the unpacked root alone, outside the source tree.
if [ -n "$python" ]; then
  (cd "$work" && env -u PYTHONPATH PYTHONPATH="$root/usr/lib/python3/dist-packages" \
      PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 LD_LIBRARY_PATH="$libdir" \
      "$python" "$source/python/tests/installed_check.py" \
      --module-dir "$root/usr/lib/python3/dist-packages/tfm" --version "$version" \
      --cli "$root/usr/bin/tfm") > "$work/python.log" 2>&1 \
    || { cat "$work/python.log" >&2; fail "the package's Python module failed"; }
  tail -n 1 "$work/python.log"
fi
rm -rf "$work"
echo "$(basename "$deb"): built, its fields and files checked, unpacked and run: ok ($((SECONDS - start)) s)"
