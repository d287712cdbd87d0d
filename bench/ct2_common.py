"""Finding the from-source CTranslate2 (scripts/build_ctranslate2.sh) for the bench scripts.

A script takes `--ct2 BUILD_DIR` (default: $CT2_BUILD), the BUILD_DIR that build_ctranslate2.sh
built into; its Python package is BUILD_DIR/install/python/ctranslate2. Without one, an installed
`ctranslate2` module is used when there is one. When neither is there the script skips: it prints
one line saying so and exits with status 0.
"""

import importlib
import os
import sys


def add_argument(parser):
    parser.add_argument("--ct2", default=os.environ.get("CT2_BUILD", ""),
                        help="CTranslate2's build folder (scripts/build_ctranslate2.sh; "
                             "default $CT2_BUILD)")


def import_ctranslate2(build_dir, script):
    """The ctranslate2 module of build_dir (or an installed one), or None after the skip line."""
    if build_dir:
        package = os.path.join(os.path.abspath(build_dir), "install", "python")
        if not os.path.isdir(os.path.join(package, "ctranslate2")):
            print(f"{script}: skipped: no CTranslate2 Python package in {package} "
                  "(scripts/build_ctranslate2.sh SRC_DIR BUILD_DIR builds it)")
            return None
        sys.path.insert(0, package)
    try:
        module = importlib.import_module("ctranslate2")
        module.Translator  # noqa: B018 (the package without its compiled extension lacks it)
    except (ImportError, AttributeError):
        print(f"{script}: skipped: CTranslate2 is not built (scripts/build_ctranslate2.sh "
              "SRC_DIR BUILD_DIR, then --ct2 BUILD_DIR or CT2_BUILD=BUILD_DIR)")
        return None
    return module
