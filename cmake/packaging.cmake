# Installing and packaging (docs/PACKAGING.md), included at the end of CMakeLists.txt, after the
# install rules of the library (component `library`) and the Python module (component `python`):
# the `tfm` program's install rule (component `cli`), the Debian package (CPack's DEB generator) and
# the tests of the packages. The wheel of the Python module is built by python/setup.py over this
# build (`pip wheel --no-build-isolation python/`).

# The `tfm` program in <prefix>/bin. It finds the libraries it was linked with outside the system's
# directories (a CUDA toolkit's) where the build found them, as the Python module does.
install(TARGETS tfm RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
set_target_properties(tfm PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)

# The Debian package: one .deb, tfm_<version>-1_<arch>.deb, with every component the default
# install installs (cli, library, python) under /usr:
#   cmake --build --preset release --target package    (or: cd build/release && cpack)
# It lands in the build tree's packages/. Depends: the shared libraries that the program and the
# Python module load, found by dpkg-shlibdeps (dpkg-dev) from the packages that own them here; the
# Python that the module was built for; numpy. Libraries that no package owns (a CUDA toolkit
# installed outside apt) are left out of Depends: a .deb of a CUDA build runs only where that
# toolkit is (docs/PACKAGING.md). The library is whatever TFM_SHARED builds; a static libtfm needs
# the development packages of its libraries to link a program against it, which are suggested.
set(CPACK_VERBATIM_VARIABLES ON)  # the values below reach CPackConfig.cmake as written (quotes)
set(CPACK_PACKAGE_NAME tfm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Transformer translation toolkit: tfm command, library, headers, Python module")
set(CPACK_PACKAGE_DESCRIPTION
    "The Transformer of \"Attention Is All You Need\" in C++: the tfm command (train, translate, \
score, BLEU, serve, convert), the libtfm library with its public headers and CMake package \
(find_package(tfm)), and the tfm Python module.")
set(TFM_PACKAGE_MAINTAINER "tfm maintainers <tfm@invalid>" CACHE STRING
    "The Maintainer field of the .deb")
set(CPACK_PACKAGE_CONTACT "${TFM_PACKAGE_MAINTAINER}")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(TFM_PACKAGE_DEPENDS "")
if(TFM_HAVE_PYTHON)
  # The module is built for one Python (its extension's ABI): that minor version, as Debian's own
  # extension packages depend on it.
  set(next_minor ${Python3_VERSION_MINOR})
  math(EXPR next_minor "${next_minor} + 1")
  list(APPEND TFM_PACKAGE_DEPENDS
       "python3 (>= ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}~)"
       "python3 (<< ${Python3_VERSION_MAJOR}.${next_minor})" python3-numpy)
endif()
string(REPLACE ";" ", " CPACK_DEBIAN_PACKAGE_DEPENDS "${TFM_PACKAGE_DEPENDS}")
if(TFM_SHARED)
  # libtfm.so.0.1's shlibs file, and the trigger that runs ldconfig when the package is installed.
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
else()
  # What tfmConfig.cmake finds again for a program that links the static libtfm.
  set(TFM_PACKAGE_SUGGESTS cmake g++ pkg-config libdnnl-dev libfmt-dev libyaml-cpp-dev zlib1g-dev
                           libicu-dev libsentencepiece-dev)
  if(TFM_HAVE_MPI)
    list(APPEND TFM_PACKAGE_SUGGESTS libopenmpi-dev)
  endif()
  string(REPLACE ";" ", " CPACK_DEBIAN_PACKAGE_SUGGESTS "${TFM_PACKAGE_SUGGESTS}")
endif()
# No source package: `git archive` makes one. Should someone run `make package_source`, it leaves
# out the build trees and what is not source.
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build/" "/build-[^/]*/" "/runs/" "/node_modules/"
                              "/__pycache__/")
include(CPack)

# The tests of the packages (tests/package/deb_test.sh, python/tests/wheel_check.py). Each builds its
# package from this build tree, so it runs apart from the other tests that run the build tool here
# (RESOURCE_LOCK build_tree). Not in the sanitizer builds: an outside program or Python would need
# the sanitizer's runtime to run their files.
if(TFM_BUILD_TESTS AND NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  # The .deb: built with cpack, its fields and files checked, unpacked with dpkg -x into a scratch
  # root whose `tfm` and Python module are run from there.
  set(python "")
  if(TFM_HAVE_PYTHON)
    set(python --python ${Python3_EXECUTABLE})
  endif()
  add_test(NAME Package.DebInstallsTheProgramLibraryAndModule
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/package/deb_test.sh --build ${CMAKE_BINARY_DIR}
                   --source ${CMAKE_SOURCE_DIR} --cpack ${CMAKE_CPACK_COMMAND}
                   --generator ${CMAKE_GENERATOR} --cxx ${CMAKE_CXX_COMPILER} ${python})
  set_tests_properties(Package.DebInstallsTheProgramLibraryAndModule PROPERTIES TIMEOUT 120
                       RESOURCE_LOCK build_tree ENVIRONMENT "OMP_NUM_THREADS=2")
  # The wheel: `pip wheel --no-build-isolation` over this build tree, installed into a fresh venv,
  # imported from there, trained and translated. The wheel carries the extension alone: it needs a
  # static libtfm.
  if(TFM_HAVE_PYTHON AND NOT TFM_SHARED)
    add_test(NAME Package.WheelInstallsIntoAVenv
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/python/tests/wheel_check.py
                     --build-dir ${CMAKE_BINARY_DIR} --cli $<TARGET_FILE:tfm>
                     --work ${CMAKE_BINARY_DIR}/wheel-test)
    set_tests_properties(Package.WheelInstallsIntoAVenv PROPERTIES TIMEOUT 300
                         RESOURCE_LOCK build_tree ENVIRONMENT "OMP_NUM_THREADS=2")
  endif()
endif()
