# sdk_headers: every header of sdk/include/grpo compiles on its own (it is the first and only
# include of its translation unit, included twice to exercise its guard) as strict C99
# (-std=c99 -Wall -Wextra -Werror -pedantic) and as C++11 (same warnings), with nothing but
# sdk/include on the include path and none of the project's compile options. The sources are
# generated one-liners; the targets are left out of `all` and built by the test, so a broken
# header shows up as this failing test with the compiler's message.
file(GLOB GRPO_SDK_HEADERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/sdk/include/grpo/*.h)
set(sdk_c_sources)
set(sdk_cxx_sources)
foreach(h ${GRPO_SDK_HEADERS})
  get_filename_component(name ${h} NAME_WE)
  foreach(ext c cpp)
    set(src ${CMAKE_CURRENT_BINARY_DIR}/sdk_headers/${name}_alone.${ext})
    set(text "#include \"grpo/${name}.h\"\n#include \"grpo/${name}.h\"\n")
    if(EXISTS ${src})
      file(READ ${src} old)
    else()
      set(old "")
    endif()
    if(NOT old STREQUAL text)
      file(WRITE ${src} "${text}")
    endif()
    if(ext STREQUAL "c")
      list(APPEND sdk_c_sources ${src})
    else()
      list(APPEND sdk_cxx_sources ${src})
    endif()
  endforeach()
endforeach()
set(sdk_strict_flags -Wall -Wextra -Werror -pedantic)
add_library(grpo_sdk_headers_c OBJECT EXCLUDE_FROM_ALL ${sdk_c_sources})
set_target_properties(grpo_sdk_headers_c PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON
  C_EXTENSIONS OFF COMPILE_OPTIONS "${sdk_strict_flags}" COMPILE_DEFINITIONS ""
  INCLUDE_DIRECTORIES ${PROJECT_SOURCE_DIR}/sdk/include)
add_library(grpo_sdk_headers_cxx OBJECT EXCLUDE_FROM_ALL ${sdk_cxx_sources})
set_target_properties(grpo_sdk_headers_cxx PROPERTIES CXX_STANDARD 11 CXX_STANDARD_REQUIRED ON
  CXX_EXTENSIONS OFF COMPILE_OPTIONS "${sdk_strict_flags}" COMPILE_DEFINITIONS ""
  INCLUDE_DIRECTORIES ${PROJECT_SOURCE_DIR}/sdk/include)
add_custom_target(grpo_sdk_headers)
add_dependencies(grpo_sdk_headers grpo_sdk_headers_c grpo_sdk_headers_cxx)
add_test(NAME sdk_headers COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR}
  --target grpo_sdk_headers)
