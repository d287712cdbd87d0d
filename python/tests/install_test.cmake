# The CTest test Python.InstallsIntoAPrefix: installs the python component of BUILD_DIR into a
# fresh prefix and imports tfm from <prefix>/PACKAGE_DIR with nothing else on the path.
# Usage: cmake -DBUILD_DIR=... -DPYTHON=... -DPACKAGE_DIR=lib/python3/dist-packages -P install_test.cmake
set(prefix ${BUILD_DIR}/python-install-test)
file(REMOVE_RECURSE ${prefix})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --component python --prefix ${prefix}
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --install --component python failed: ${status}")
endif()
# Run from the prefix, so that the source and build trees are not on the path.
execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${prefix}/${PACKAGE_DIR} PYTHONNOUSERSITE=1
                        ${PYTHON} -c "import tfm; print(tfm.__file__); print(tfm.bleu(['a b c d'], ['a b c d']).score)"
                WORKING_DIRECTORY ${prefix} RESULT_VARIABLE status OUTPUT_VARIABLE output
                ERROR_VARIABLE errors)
file(REMOVE_RECURSE ${prefix})
if(NOT status EQUAL 0)
  message(FATAL_ERROR "import tfm from the installed package failed: ${errors}")
endif()
if(NOT output MATCHES "^${prefix}/${PACKAGE_DIR}/tfm/__init__.py\n100.0")
  message(FATAL_ERROR "tfm was not imported from ${prefix}/${PACKAGE_DIR}: ${output}")
endif()
message(STATUS "installed and imported: ${output}")
