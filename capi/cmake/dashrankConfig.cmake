# CMake package of dashrank's C API. `cargo cinstall -p dashrank-capi` installs it as
# <prefix>/share/dashrank/cmake/dashrankConfig.cmake, beside the library it describes:
#
#   find_package(dashrank 0.1 CONFIG REQUIRED)        # -DCMAKE_PREFIX_PATH=<prefix> if not in /usr/local
#   target_link_libraries(app PRIVATE dashrank::dashrank)          # lib/libdashrank.so.<ABI>
#   target_link_libraries(app PRIVATE dashrank::dashrank_static)   # lib/libdashrank.a
#
# Both targets carry the include directory (dashrank.h; dashrank.hpp needs C++17;
# dashrank_taco.hpp also needs TACO's headers and libtaco). The package is relocatable: every
# path is found from this file's place, and the library in <prefix>/lib, lib64 or the
# multiarch lib/<triple> (cargo-c's default libdir on Debian). Also set: dashrank_VERSION,
# dashrank_ABI_VERSION, dashrank_INCLUDE_DIR, dashrank_LIBRARY, dashrank_STATIC_LIBRARY.
cmake_policy(PUSH)
cmake_policy(VERSION 3.14)

get_filename_component(_dashrank_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

macro(_dashrank_fail message)
  set(dashrank_FOUND FALSE)
  set(dashrank_NOT_FOUND_MESSAGE "${message}")
  cmake_policy(POP)
  return()
endmacro()

set(dashrank_INCLUDE_DIR "${_dashrank_prefix}/include")
if(NOT EXISTS "${dashrank_INCLUDE_DIR}/dashrank.h")
  _dashrank_fail("dashrank.h is not in ${dashrank_INCLUDE_DIR} (this file belongs to an install by cargo cinstall)")
endif()
file(STRINGS "${dashrank_INCLUDE_DIR}/dashrank.h" _dashrank_abi REGEX "^#define DASHRANK_ABI_VERSION [0-9]+$")
string(REGEX REPLACE "^#define DASHRANK_ABI_VERSION " "" dashrank_ABI_VERSION "${_dashrank_abi}")

set(_dashrank_libdirs lib lib64)
if(CMAKE_LIBRARY_ARCHITECTURE)
  list(PREPEND _dashrank_libdirs "lib/${CMAKE_LIBRARY_ARCHITECTURE}")
endif()
set(_dashrank_shared_name "${CMAKE_SHARED_LIBRARY_PREFIX}dashrank${CMAKE_SHARED_LIBRARY_SUFFIX}")
set(_dashrank_static_name "${CMAKE_STATIC_LIBRARY_PREFIX}dashrank${CMAKE_STATIC_LIBRARY_SUFFIX}")
set(dashrank_LIBRARY "")
foreach(_dir IN LISTS _dashrank_libdirs)
  if(NOT dashrank_LIBRARY AND EXISTS "${_dashrank_prefix}/${_dir}/${_dashrank_shared_name}")
    set(dashrank_LIBRARY "${_dashrank_prefix}/${_dir}/${_dashrank_shared_name}")
    set(dashrank_STATIC_LIBRARY "${_dashrank_prefix}/${_dir}/${_dashrank_static_name}")
    set(_dashrank_libdir "${_dashrank_prefix}/${_dir}")
  endif()
endforeach()
if(NOT dashrank_LIBRARY)
  list(JOIN _dashrank_libdirs ", " _dirs)
  _dashrank_fail("${_dashrank_shared_name} is in none of ${_dirs} under ${_dashrank_prefix}")
endif()

if(NOT TARGET dashrank::dashrank)
  add_library(dashrank::dashrank SHARED IMPORTED)
  set_target_properties(dashrank::dashrank PROPERTIES
    IMPORTED_LOCATION "${dashrank_LIBRARY}"
    IMPORTED_SONAME "${_dashrank_shared_name}.${dashrank_ABI_VERSION}"
    INTERFACE_INCLUDE_DIRECTORIES "${dashrank_INCLUDE_DIR}")
endif()

# The static archive needs the system libraries Rust's standard library uses: the ones
# cargo-c wrote into dashrank.pc (Libs.private, from `rustc --print native-static-libs`).
if(NOT TARGET dashrank::dashrank_static AND EXISTS "${dashrank_STATIC_LIBRARY}")
  set(_dashrank_pc "${_dashrank_libdir}/pkgconfig/dashrank.pc")
  set(_dashrank_private "")
  if(EXISTS "${_dashrank_pc}")
    file(STRINGS "${_dashrank_pc}" _dashrank_line REGEX "^Libs.private:")
    string(REGEX MATCHALL "-l[^ ]+" _dashrank_flags "${_dashrank_line}")
    foreach(_flag IN LISTS _dashrank_flags)
      string(SUBSTRING "${_flag}" 2 -1 _lib)
      list(APPEND _dashrank_private "${_lib}")
    endforeach()
  endif()
  add_library(dashrank::dashrank_static STATIC IMPORTED)
  set_target_properties(dashrank::dashrank_static PROPERTIES
    IMPORTED_LOCATION "${dashrank_STATIC_LIBRARY}"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_INCLUDE_DIRECTORIES "${dashrank_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${_dashrank_private}")
endif()

set(dashrank_FOUND TRUE)
cmake_policy(POP)
