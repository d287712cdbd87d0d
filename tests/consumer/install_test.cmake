# The CTest tests PublicApi.InstalledPackage{Static,Shared}: installs one kind of libtfm with its
# headers and CMake package into a fresh prefix (`cmake --install --component`), then configures,
# builds and runs tests/consumer, an outside project that finds it with find_package(tfm). For a
# shared libtfm it also checks the hidden visibility: no symbol of an internal namespace
# (tfm::<layer>::) is exported.
# Usage: cmake -DBUILD_DIR=... -DCOMPONENT=... [-DTARGET=...] -DKIND=static|shared
#              -DGENERATOR=... -DCXX=... -DNM=... -DFIXTURE=... -P install_test.cmake
# TARGET: a target of BUILD_DIR to build first (the libtfm of the kind the build does not install).
cmake_policy(VERSION 3.25)
set(work ${BUILD_DIR}/install-test-${KIND})
file(REMOVE_RECURSE ${work})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output
                  ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "${command} failed (${status}):\n${output}")
  endif()
  set(output "${output}" PARENT_SCOPE)
endfunction()

if(TARGET)
  run(${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET})
endif()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --component ${COMPONENT} --prefix ${work}/prefix)
file(GLOB_RECURSE installed RELATIVE ${work}/prefix ${work}/prefix/*)
message(STATUS "installed: ${installed}")
foreach(file include/tfm/tfm.h include/tfm/export.h include/tfm/version.h)
  if(NOT EXISTS ${work}/prefix/${file})
    message(FATAL_ERROR "${file} was not installed")
  endif()
endforeach()
file(GLOB_RECURSE config ${work}/prefix/*/cmake/tfm/tfmConfig.cmake)
file(GLOB_RECURSE archive ${work}/prefix/*/libtfm.a)
file(GLOB_RECURSE shared_library ${work}/prefix/*/libtfm.so)
if(NOT config)
  message(FATAL_ERROR "no lib/cmake/tfm/tfmConfig.cmake was installed")
endif()
if(KIND STREQUAL "static" AND (NOT archive OR shared_library))
  message(FATAL_ERROR "a static libtfm alone was expected")
elseif(KIND STREQUAL "shared" AND (archive OR NOT shared_library))
  message(FATAL_ERROR "a shared libtfm alone was expected")
endif()

# The outside project, against the prefix alone.
run(${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR} -B ${work}/build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${work}/prefix)
run(${CMAKE_COMMAND} --build ${work}/build)
execute_process(COMMAND ${work}/build/consumer ${FIXTURE} RESULT_VARIABLE status
                OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT status EQUAL 0 OR NOT output MATCHES "vocab.model: missing")
  message(FATAL_ERROR "the consumer failed (${status}):\n${output}")
endif()
message(STATUS "consumer: ${output}")

if(KIND STREQUAL "shared")
  run(${NM} -D -C --defined-only ${shared_library})
  string(REGEX MATCHALL "[^\n]*tfm::[a-z_]+::[^\n]*" internal "${output}")
  string(REGEX MATCHALL "[^\n]*tfm::[^\n]*" public "${output}")
  list(LENGTH public count)
  if(internal)
    string(REPLACE ";" "\n" internal "${internal}")
    message(FATAL_ERROR "libtfm.so exports internal symbols:\n${internal}")
  endif()
  message(STATUS "libtfm.so exports ${count} symbols of tfm, none of an internal namespace")
endif()
file(REMOVE_RECURSE ${work})
