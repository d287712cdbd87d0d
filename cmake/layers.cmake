# The layers of src/tfm as CMake targets (docs/ARCHITECTURE.md, "The layers" and "The library").
#
#   tfm_add_layer(<name> [PROGRAM] [DEPENDS <layer>...] [LIBRARIES <target>...]
#                 [EXCLUDE <regex>...] [SOURCES <file>...] [OBJECTS <object>...])
#
# makes tfm_<name>, a static library of src/tfm/<name>/**/*.cc (less the files matching an EXCLUDE
# regex, plus SOURCES and the compiled OBJECTS of other targets: the CPU kernel sets), linked to the layers it may use (DEPENDS: the folders of its row in
# tests/test_layering.cc's table) and to the outside libraries it uses itself (LIBRARIES; public, as
# a layer's header may include them). A layer whose folder holds no source yet makes no target, and
# a DEPENDS layer without a target is passed over, so that a folder can be added or removed without
# touching this file. A layer is added after the layers it depends on. PROGRAM: the layer of a
# program (cli): an object library, whose objects the program links. The programs' layers (those
# in TFM_DRIVER_LAYERS) are compiled with TFM_DRIVER_FLAGS, the others with TFM_LAYER_FLAGS.
#
# Every layer's objects are position-independent and have hidden visibility: only what
# include/tfm/export.h's TFM_API marks leaves a shared libtfm.
#
# Each layer also gets tfm_link_check_<name> (not built by default; the target tfm_link_checks
# builds them all): a shared object of the layer's objects and those of every layer below it in the
# table (its DEPENDS, theirs, ...), with its and their LIBRARIES, linked with -Wl,--no-undefined.
# A symbol that the layer's code uses from a layer outside that set (one above it, or beside it like
# data/ and nn/) is then an undefined reference and the link fails: the table, enforced by the
# linker.

# The global properties behind the table: the layers in order, and per layer the layers below it
# (itself included) and its outside libraries.
define_property(GLOBAL PROPERTY TFM_LAYERS BRIEF_DOCS "tfm's layers, lowest first"
                FULL_DOCS "cmake/layers.cmake")

function(tfm_add_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "PROGRAM" "" "DEPENDS;LIBRARIES;EXCLUDE;SOURCES;OBJECTS")
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/tfm/${name}/*.cc)
  foreach(regex IN LISTS arg_EXCLUDE)
    list(FILTER sources EXCLUDE REGEX "${regex}")
  endforeach()
  list(APPEND sources ${arg_SOURCES})
  if(NOT sources)
    message(STATUS "tfm: layer ${name}: no sources, no target")
    return()
  endif()

  set(target tfm_${name})
  if(arg_PROGRAM)
    add_library(${target} OBJECT ${sources} ${arg_OBJECTS})
  else()
    add_library(${target} STATIC ${sources} ${arg_OBJECTS})
  endif()
  # Everything the layer compiles into a library: its own objects and the OBJECTS.
  set_property(GLOBAL PROPERTY TFM_LAYER_OBJECTS_${name} $<TARGET_OBJECTS:${target}> ${arg_OBJECTS})
  set(flags ${TFM_LAYER_FLAGS})
  if(name IN_LIST TFM_DRIVER_LAYERS)
    set(flags ${TFM_DRIVER_FLAGS})
  endif()
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON
                        CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
                        VISIBILITY_INLINES_HIDDEN ON)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${flags}>")
  target_link_libraries(${target} PUBLIC tfm_layer_base ${arg_LIBRARIES})

  set(below ${name})
  set(libraries ${arg_LIBRARIES})
  foreach(dep IN LISTS arg_DEPENDS)
    if(TARGET tfm_${dep})
      target_link_libraries(${target} PUBLIC tfm_${dep})
      get_property(dep_below GLOBAL PROPERTY TFM_LAYER_BELOW_${dep})
      get_property(dep_libraries GLOBAL PROPERTY TFM_LAYER_LIBRARIES_${dep})
      list(APPEND below ${dep_below})
      list(APPEND libraries ${dep_libraries})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES below)
  list(REMOVE_DUPLICATES libraries)
  set_property(GLOBAL PROPERTY TFM_LAYER_BELOW_${name} ${below})
  set_property(GLOBAL PROPERTY TFM_LAYER_LIBRARIES_${name} ${libraries})
  set_property(GLOBAL APPEND PROPERTY TFM_LAYERS ${name})

  set(objects "")
  foreach(layer IN LISTS below)
    get_property(layer_objects GLOBAL PROPERTY TFM_LAYER_OBJECTS_${layer})
    list(APPEND objects ${layer_objects})
  endforeach()
  add_library(tfm_link_check_${name} SHARED EXCLUDE_FROM_ALL ${objects})
  set_target_properties(tfm_link_check_${name} PROPERTIES LINKER_LANGUAGE CXX)
  target_link_libraries(tfm_link_check_${name} PRIVATE tfm_layer_base ${libraries})
  target_link_options(tfm_link_check_${name} PRIVATE -Wl,--no-undefined)
  if(NOT TARGET tfm_link_checks)
    add_custom_target(tfm_link_checks)
  endif()
  add_dependencies(tfm_link_checks tfm_link_check_${name})
endfunction()

# The layers listed, in order, whose names the variable `out` receives: those that have a target.
function(tfm_existing_layers out)
  set(result "")
  foreach(layer IN LISTS ARGN)
    if(TARGET tfm_${layer})
      list(APPEND result ${layer})
    endif()
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# The layer table itself is tests/test_layering.cc's allowed_includes(), read here so that it is
# written once: that test checks the includes against it, the build links by it. Each row,
# `{"name", {"dep", ...}},`, names a folder of src/tfm and the layers it may use. The variable `out`
# receives the layers in an order where each comes after those it uses; `<out>_<layer>` their rows.
function(tfm_read_layer_table file out)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  file(READ ${file} text)
  string(REGEX MATCH "allowed_includes\\(\\) {[^;]*};" table "${text}")
  string(REGEX MATCHALL "{\"[a-z_]+\",[ \n]*{[^}]*}}" rows "${table}")
  if(NOT rows)
    message(FATAL_ERROR "no layer table found in ${file} (allowed_includes(), rows "
                        "{\"name\", {\"dep\", ...}})")
  endif()
  set(pending "")
  foreach(row IN LISTS rows)
    string(REGEX MATCHALL "\"[a-z_]+\"" names "${row}")
    string(REPLACE "\"" "" names "${names}")
    list(POP_FRONT names layer)
    list(APPEND pending ${layer})
    set(deps_${layer} ${names})
    set(${out}_${layer} ${names} PARENT_SCOPE)
  endforeach()
  # Topological order: a pass adds every layer whose rows are all added; none added is a cycle.
  set(order "")
  while(pending)
    set(progress OFF)
    foreach(layer IN LISTS pending)
      set(ready ON)
      foreach(dep IN LISTS deps_${layer})
        if(NOT dep IN_LIST order)
          set(ready OFF)
        endif()
      endforeach()
      if(ready)
        list(APPEND order ${layer})
        list(REMOVE_ITEM pending ${layer})
        set(progress ON)
      endif()
    endforeach()
    if(NOT progress)
      message(FATAL_ERROR "the layer table of ${file} has a cycle or an unknown layer among: "
                          "${pending}")
    endif()
  endwhile()
  set(${out} ${order} PARENT_SCOPE)
endfunction()
