# Version of the installed dashrank C API for find_package(dashrank <version>), read from the
# installed header (DASHRANK_VERSION_MAJOR/MINOR/PATCH) so it cannot disagree with it.
# Compatible: the same major version and not older; for 0.x, the same minor version too
# (cargo's rule for breaking changes).
get_filename_component(_dashrank_header "${CMAKE_CURRENT_LIST_DIR}/../../../include/dashrank.h" ABSOLUTE)
if(NOT EXISTS "${_dashrank_header}")
  set(PACKAGE_VERSION "unknown")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  return()
endif()
foreach(_part MAJOR MINOR PATCH)
  file(STRINGS "${_dashrank_header}" _line REGEX "^#define DASHRANK_VERSION_${_part} [0-9]+$")
  string(REGEX REPLACE "^#define DASHRANK_VERSION_${_part} " "" _dashrank_${_part} "${_line}")
endforeach()
set(PACKAGE_VERSION "${_dashrank_MAJOR}.${_dashrank_MINOR}.${_dashrank_PATCH}")

set(PACKAGE_VERSION_COMPATIBLE FALSE)
if(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_FIND_VERSION_MAJOR STREQUAL _dashrank_MAJOR
       AND NOT PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION
       AND (NOT _dashrank_MAJOR STREQUAL "0" OR PACKAGE_FIND_VERSION_MINOR STREQUAL _dashrank_MINOR))
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
if(PACKAGE_FIND_VERSION AND PACKAGE_VERSION VERSION_EQUAL PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
