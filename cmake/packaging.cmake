# Installing and packaging (docs/PACKAGING.md), included at the end of CMakeLists.txt, after the
# install rules of the library (component `library`) and the Python module (component `python`):
# the tests of the packages. The wheel of the Python module is built by python/setup.py over this
# build (`pip wheel --no-build-isolation python/`).

# The tests of the packages (python/tests/wheel_check.py). Each builds its
# package from this build tree, so it runs apart from the other tests that run the build tool here
# (RESOURCE_LOCK build_tree). Not in the sanitizer builds: an outside program or Python would need
# the sanitizer's runtime to run their files.
if(TFM_BUILD_TESTS AND NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize")
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
