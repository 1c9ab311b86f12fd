# grpo_add_pack(NAME <pack> MANIFEST <pack.ini> SOURCES <files...> [LIBRARY <target>])
#
# Builds a plugin pack: one MODULE library (hidden visibility, only GRPO_EXPORT symbols visible)
# plus its manifest, laid out as <GRPO_PACK_OUTPUT_DIR>/<pack>/{pack.ini,<library>.so} and
# installed to <GRPO_PACK_INSTALL_DIR>/<pack>/. Used by the built-in packs and, through the
# installed grpo-sdk CMake package, by third-party packs. The target links grpo::sdk (headers only).
#
# GRPO_PACK_OUTPUT_DIR defaults to <build dir>/packs (a ready plugin dir: point GRPO_PLUGIN_PATH
# or --plugin-path at it). GRPO_PACK_INSTALL_DIR defaults to <libdir>/grpo/packs under the
# project's install prefix, where a grpo installed to the same prefix finds it with no setup;
# set it to "" to install nothing, or to grpo's own pack dir (GRPO_SDK_PACK_DIR) to install there.
if(NOT DEFINED GRPO_PACK_INSTALL_DIR)
  include(GNUInstallDirs)
  set(GRPO_PACK_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/grpo/packs)
endif()
function(grpo_add_pack)
  cmake_parse_arguments(P "" "NAME;MANIFEST;LIBRARY" "SOURCES" ${ARGN})
  if(NOT P_NAME OR NOT P_MANIFEST OR NOT P_SOURCES)
    message(FATAL_ERROR "grpo_add_pack: NAME, MANIFEST and SOURCES are required")
  endif()
  if(NOT P_LIBRARY)
    set(P_LIBRARY grpo-${P_NAME})
  endif()
  if(NOT GRPO_PACK_OUTPUT_DIR)
    set(GRPO_PACK_OUTPUT_DIR ${CMAKE_BINARY_DIR}/packs)
  endif()
  add_library(${P_LIBRARY} MODULE ${P_SOURCES})
  target_link_libraries(${P_LIBRARY} PRIVATE grpo::sdk)
  set_target_properties(${P_LIBRARY} PROPERTIES
    PREFIX "lib" C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${GRPO_PACK_OUTPUT_DIR}/${P_NAME})
  configure_file(${P_MANIFEST} ${GRPO_PACK_OUTPUT_DIR}/${P_NAME}/pack.ini COPYONLY)
  if(GRPO_PACK_INSTALL_DIR)
    install(TARGETS ${P_LIBRARY} LIBRARY DESTINATION ${GRPO_PACK_INSTALL_DIR}/${P_NAME})
    install(FILES ${P_MANIFEST} DESTINATION ${GRPO_PACK_INSTALL_DIR}/${P_NAME} RENAME pack.ini)
  endif()
endfunction()
