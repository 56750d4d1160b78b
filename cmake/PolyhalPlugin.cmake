# polyhal_add_plugin(<name> SOURCES <src>... [INSTALL_COMPONENT <component>]
#                    [OUTPUT_DIRECTORY <dir>])
#
# Builds libpolyhal_plugin_<name>.so as a MODULE library with the rules every
# plugin must follow: linked against polyhal::core with --no-undefined (a
# missing symbol fails the build, not a user's run), hidden visibility so the
# descriptor alias is the only export, and installed into the plugin directory
# the launcher searches. Shipped in polyhal-dev for out-of-tree plugins.
function(polyhal_add_plugin name)
  cmake_parse_arguments(ARG "" "INSTALL_COMPONENT;OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
  set(target polyhal_plugin_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE polyhal::core)
  # polyhal/app/ headers refuse to compile in a plugin (not_for_plugins.hpp).
  target_compile_definitions(${target} PRIVATE POLYHAL_BUILDING_PLUGIN)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "polyhal_plugin_${name}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED POLYHAL_BUILD_PLUGIN_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${POLYHAL_BUILD_PLUGIN_DIR}")
  endif()
  if(COMMAND polyhal_set_warnings)
    polyhal_set_warnings(${target})
  endif()
  if(ARG_INSTALL_COMPONENT)
    install(TARGETS ${target} LIBRARY DESTINATION "${POLYHAL_PLUGIN_INSTALL_DIR}"
            COMPONENT ${ARG_INSTALL_COMPONENT})
  endif()
endfunction()
