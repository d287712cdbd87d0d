"""setuptools over tfm's CMake build: the wheel of the Python module (docs/PACKAGING.md).

    /usr/bin/python3 -m pip wheel --no-build-isolation --no-deps -w dist python/

build_ext compiles nothing itself; it has CMake build the `_tfm` extension:
  - with TFM_WHEEL_BUILD_DIR=DIR, in DIR, an already configured build tree of this checkout
    (build/release: `cmake --build DIR --target _tfm`, nothing to do when it is up to date; the
    CTest test Package.WheelInstallsIntoAVenv builds its wheel so);
  - else in a tree of its own, build/wheel at the repository's root, configured as a release build
    without the tests and benchmarks; CMAKE_ARGS adds options (`CMAKE_ARGS=-DTFM_NATIVE=ON` for a
    wheel for this CPU alone; the default runs on any x86-64-v2 CPU, docs/ARCHITECTURE.md).
Then `cmake --install DIR --component python` into a scratch prefix, and the extension installed
there (with its install RPATH, not the build tree's) goes into the wheel beside the package's
Python files (python/tfm). libtfm is linked into the extension statically; the shared libraries it
uses (oneDNN, SentencePiece, ICU, yaml-cpp, fmt, OpenMP; MPI and CUDA where the build has them) are
the system's, as for the `tfm` program. So the wheel is for Debian 12 on x86-64 with those
installed (scripts/setup.sh installs them), tagged linux_x86_64: not a manylinux wheel.
setuptools' own scratch files go to <build tree>/python-wheel, never into python/.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent.parent


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    match = re.search(r"project\(tfm\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+)", text)
    if not match:
        sys.exit("setup.py: no project(tfm VERSION x.y.z) in CMakeLists.txt")
    return match.group(1)


def cmake_build_dir():
    """The CMake build tree: TFM_WHEEL_BUILD_DIR's, or build/wheel."""
    given = os.environ.get("TFM_WHEEL_BUILD_DIR")
    return (Path(given).resolve(), True) if given else (ROOT / "build" / "wheel", False)


def cache_value(cache, name):
    match = re.search(rf"^{re.escape(name)}:[A-Z_]+=(.*)$", cache, re.MULTILINE)
    return match.group(1) if match else None


def run(command):
    print("setup.py:", " ".join(shlex.quote(str(part)) for part in command), flush=True)
    subprocess.run([str(part) for part in command], check=True)


class CMakeBuild(build_ext):
    """Builds the `_tfm` extension with the project's CMake build (the module docstring)."""

    def build_extension(self, ext):
        cmake = os.environ.get("CMAKE", shutil.which("cmake"))
        if not cmake:
            sys.exit("setup.py: no cmake on the PATH (Debian: apt-get install cmake; scripts/setup.sh)")
        build_dir, given = cmake_build_dir()
        if given:
            self.check_given_tree(build_dir)
        else:
            command = [cmake, "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                       "-DTFM_BUILD_TESTS=OFF", "-DTFM_BUILD_BENCH=OFF", "-DTFM_SHARED=OFF",
                       f"-DPython3_EXECUTABLE={sys.executable}"]
            if not (build_dir / "CMakeCache.txt").exists() and shutil.which("ninja"):
                command += ["-G", "Ninja"]
            run(command + shlex.split(os.environ.get("CMAKE_ARGS", "")))
        try:
            run([cmake, "--build", build_dir, "--target", "_tfm"])
        except subprocess.CalledProcessError:
            sys.exit(f"setup.py: building the _tfm target in {build_dir} failed (see above; without "
                     "Python's headers or pybind11 CMake leaves the module out: python3-dev, "
                     "pybind11-dev)")
        prefix = Path(self.build_temp).resolve() / "cmake-install"
        shutil.rmtree(prefix, ignore_errors=True)
        run([cmake, "--install", build_dir, "--component", "python", "--prefix", prefix])
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = sorted(prefix.glob(f"**/tfm/_tfm{suffix}"))
        if len(built) != 1:
            others = sorted(str(path.relative_to(prefix)) for path in prefix.glob("**/tfm/_tfm*"))
            sys.exit(f"setup.py: expected one tfm/_tfm{suffix} (this Python's) in {prefix}, found "
                     f"{others or 'none'}: was {build_dir} configured for another Python? "
                     "(-DPython3_EXECUTABLE)")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)
        target.chmod(0o755)

    @staticmethod
    def check_given_tree(build_dir):
        cache_file = build_dir / "CMakeCache.txt"
        if not cache_file.is_file():
            sys.exit(f"setup.py: TFM_WHEEL_BUILD_DIR={build_dir} is not a configured CMake build tree")
        cache = cache_file.read_text(encoding="utf-8", errors="replace")
        source = cache_value(cache, "CMAKE_HOME_DIRECTORY")
        if source is None or Path(source).resolve() != ROOT:
            sys.exit(f"setup.py: {build_dir} is a build tree of {source}, not of {ROOT}")
        if (cache_value(cache, "TFM_SHARED") or "OFF").upper() in ("ON", "TRUE", "1", "YES"):
            sys.exit(f"setup.py: {build_dir} builds a shared libtfm (TFM_SHARED=ON), which the "
                     "wheel would have to carry beside the extension; use a build with a static one")


build_dir, _ = cmake_build_dir()
scratch = build_dir / "python-wheel"
(scratch / "egg-info").mkdir(parents=True, exist_ok=True)

setup(
    version=project_version(),
    packages=["tfm"],
    package_data={"tfm": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("tfm._tfm", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
    options={
        "build": {"build_base": str(scratch / "build")},
        "egg_info": {"egg_base": str(scratch / "egg-info")},
    },
)
