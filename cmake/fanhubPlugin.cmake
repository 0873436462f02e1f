# fanhub_add_plugin(NAME [SOURCES] SRC... [INSTALL] [DESTINATION DIR]
#                   [OUTPUT_NAME BASENAME] [OUTPUT_DIR DIR])
#
# A consumer plugin NAME.so as the hub loads it: no "lib" prefix, C and C++
# symbols hidden but the entry point (FANHUB_EXPORT), linked to
# fanhub::consumer (the include directory of <fanhub/consumer.h> and
# <fanhub/sdk.h>; nothing of the hub is linked). INSTALL adds an install
# rule into DESTINATION (default: the plugin directory, where
# `plugin: NAME` finds it). OUTPUT_DIR is where the build puts it.
#
# The one definition, used by fanhub's own tree (CMakeLists.txt includes
# this file) and by the installed package (fanhubConfig.cmake includes its
# installed copy). Each sets the global property FANHUB_PLUGIN_INSTALL_DIR
# (the default DESTINATION) and, in the tree, FANHUB_PLUGIN_OUTPUT_DIR
# (where the build tree's hub looks for plugins).
include_guard(GLOBAL)

function(fanhub_add_plugin name)
  cmake_parse_arguments(PARSE_ARGV 1 FH "INSTALL" "DESTINATION;OUTPUT_NAME;OUTPUT_DIR"
                        "SOURCES")
  set(sources ${FH_SOURCES} ${FH_UNPARSED_ARGUMENTS})
  if(NOT sources)
    message(FATAL_ERROR "fanhub_add_plugin(${name}): no source files")
  endif()
  add_library(${name} MODULE ${sources})
  target_link_libraries(${name} PRIVATE fanhub::consumer)
  # The hub opens NAME.so for `plugin: NAME`, and only the entry point
  # needs to be seen: hidden symbols keep a plugin's helpers from meeting
  # another library's of the same name.
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(FH_OUTPUT_NAME)
    set_target_properties(${name} PROPERTIES OUTPUT_NAME "${FH_OUTPUT_NAME}")
  endif()
  if(NOT FH_OUTPUT_DIR)
    get_property(FH_OUTPUT_DIR GLOBAL PROPERTY FANHUB_PLUGIN_OUTPUT_DIR)
  endif()
  if(FH_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${FH_OUTPUT_DIR}")
  endif()
  if(FH_INSTALL)
    if(NOT FH_DESTINATION)
      get_property(FH_DESTINATION GLOBAL PROPERTY FANHUB_PLUGIN_INSTALL_DIR)
    endif()
    install(TARGETS ${name} LIBRARY DESTINATION "${FH_DESTINATION}")
  endif()
endfunction()
