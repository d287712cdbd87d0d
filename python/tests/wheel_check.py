"""The CTest test Package.WheelInstallsIntoAVenv (docs/PACKAGING.md): builds the wheel of the tfm
module with `pip wheel --no-build-isolation --no-index` over this build tree (python/setup.py with
TFM_WHEEL_BUILD_DIR: the `_tfm` target, up to date after the build, and what
`cmake --install --component python` installs), checks its name and contents, installs it into a
fresh venv (`python3 -m venv --system-site-packages`: numpy, the one dependency, is Debian's
python3-numpy) and runs installed_check.py with the venv's Python from outside the source tree: the
package comes from the venv, trains a tiny model and translates as the build's `tfm` does.

Usage: python3 wheel_check.py --build-dir DIR --cli TFM --work DIR
Offline: pip is never let near an index. Needs pip, venv, setuptools and wheel for this Python
(Debian: python3-pip, python3-venv, python3-setuptools, python3-wheel; scripts/setup.sh); without
one the test fails, saying which.
"""

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent.parent
DEBIAN_PACKAGES = {"pip": "python3-pip", "venv": "python3-venv", "ensurepip": "python3-venv",
                   "setuptools": "python3-setuptools", "wheel": "python3-wheel"}


def fail(message):
    print(f"wheel_check.py: {message}", file=sys.stderr)
    sys.exit(1)


def run(command, **kwargs):
    command = [str(part) for part in command]
    print("+", " ".join(command), flush=True)
    done = subprocess.run(command, **kwargs)
    if done.returncode != 0:
        fail(f"{' '.join(command)} failed ({done.returncode})")
    return done


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    return re.search(r"project\(tfm\s+VERSION\s+([0-9.]+)", text).group(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", required=True, type=Path)
    parser.add_argument("--cli", required=True, type=Path)
    parser.add_argument("--work", required=True, type=Path)
    args = parser.parse_args()

    missing = [f"{module} ({package})" for module, package in DEBIAN_PACKAGES.items()
               if importlib.util.find_spec(module) is None]
    if missing:
        fail(f"{sys.executable} lacks {', '.join(missing)}: scripts/setup.sh installs them")

    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = dict(os.environ, TFM_WHEEL_BUILD_DIR=str(args.build_dir.resolve()),
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PYTHONNOUSERSITE="1",
               PYTHONDONTWRITEBYTECODE="1")
    # Nothing but the wheel from outside: no extra path, no pip links or index of the machine's.
    for name in ["PYTHONPATH", "PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"]:
        env.pop(name, None)
    run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-index", "--no-deps",
         "-w", work / "dist", ROOT / "python"], env=env, cwd=work)

    # The name: tfm-<version>-<this Python's tags>.whl, platform-specific (it has an extension).
    version = project_version()
    python_tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform_tag = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    wheels = sorted((work / "dist").glob("*.whl"))
    expected = f"tfm-{version}-{python_tag}-{python_tag}-{platform_tag}.whl"
    if [wheel.name for wheel in wheels] != [expected]:
        fail(f"expected the one wheel {expected}, found {[wheel.name for wheel in wheels]}")
    wheel = wheels[0]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"tfm-{version}.dist-info/METADATA").decode("utf-8")
    for name in ["tfm/__init__.py", "tfm/convert.py", "tfm/_tfm.pyi", "tfm/py.typed",
                 f"tfm/_tfm{suffix}", f"tfm-{version}.dist-info/RECORD"]:
        if name not in names:
            fail(f"{wheel.name} has no {name}: {sorted(names)}")
    if "Requires-Dist: numpy" not in metadata.splitlines():
        fail(f"{wheel.name}'s METADATA does not require numpy:\n{metadata}")
    print(f"{wheel.name}: {len(names)} files, {wheel.stat().st_size // 1024} KiB")

    # A fresh venv; the wheel installed into it without an index (numpy is the system's).
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", venv], env=env)
    python = venv / "bin" / "python"
    # --force-reinstall --no-deps: into the venv even where a tfm of the same version is installed
    # system-wide (the .deb's), without reinstalling numpy.
    run([python, "-m", "pip", "install", "--no-index", "--force-reinstall", "--no-deps", wheel],
        env=env, cwd=work)
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                  env=env, cwd=work, capture_output=True, encoding="utf-8").stdout.strip()
    if not Path(purelib).resolve().is_relative_to(venv):
        fail(f"the venv's site-packages {purelib} is not under {venv}")
    # From the work folder, with the source tree off the path (but for python/tests itself).
    run([python, TESTS / "installed_check.py", "--module-dir", Path(purelib) / "tfm",
         "--version", version, "--cli", args.cli.resolve()], env=env, cwd=work)
    shutil.rmtree(work)
    print(f"{wheel.name}: built over {args.build_dir}, installed into a fresh venv, imported from "
          "it, trained and translated: ok")


if __name__ == "__main__":
    main()
