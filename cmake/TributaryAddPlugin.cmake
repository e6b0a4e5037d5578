# tributary_add_plugin(<name> <kind> [SOURCES] <source>...
#                      [LINK_LIBRARIES <library>...]
#                      [OUTPUT_DIRECTORY <dir>]
#                      [INSTALL_DESTINATION <dir> | NO_INSTALL])
#
# Builds a Tributary plugin, the way the built-in families and losses are
# built: the MODULE library target tributary_<kind>_<name> (<name> with '-'
# spelled '_'), whose file tributary_<kind>_<name>.so (no "lib" prefix) is the
# one the program loads when `--family <name>` / `--loss <name>` names it.
#  - <kind> is `family` or `loss`;
#  - position-independent, compiled with hidden visibility
#    (-fvisibility=hidden -fvisibility-inlines-hidden): only the symbols
#    marked TRIB_PLUGIN_EXPORT (tributary_plugin_info, tributary_plugin_init
#    and the optional tributary_plugin_options) are exported;
#  - linked to Tributary::plugin_sdk (the ABI and the header-only helpers;
#    nothing to link at run time) and to LINK_LIBRARIES (PRIVATE);
#  - written to OUTPUT_DIRECTORY (default: CMAKE_LIBRARY_OUTPUT_DIRECTORY, or
#    the current binary directory);
#  - installed (`cmake --install`) into INSTALL_DESTINATION, default
#    lib/tributary/plugins under the install prefix (the directory the
#    installed program searches when the prefix is Tributary's own; otherwise
#    put it on TRIBUTARY_PLUGIN_PATH), unless NO_INSTALL.
# The target's name is also returned in the variable TRIBUTARY_PLUGIN_TARGET,
# and appended to the global property TRIBUTARY_PLUGIN_TARGETS.
#
# Comes with find_package(Tributary); in Tributary's own tree the top-level
# CMakeLists.txt includes it.
include_guard(GLOBAL)

function(tributary_add_plugin name kind)
  cmake_parse_arguments(PARSE_ARGV 2 arg "NO_INSTALL" "OUTPUT_DIRECTORY;INSTALL_DESTINATION"
                        "SOURCES;LINK_LIBRARIES")
  if(NOT kind STREQUAL "family" AND NOT kind STREQUAL "loss")
    message(FATAL_ERROR "tributary_add_plugin(${name} ${kind}): the kind must be 'family' or 'loss'")
  endif()
  if(NOT name MATCHES "^[a-z0-9_-]+$")
    message(FATAL_ERROR "tributary_add_plugin(${name}): a plugin name is [a-z0-9_-]+")
  endif()
  if(arg_NO_INSTALL AND arg_INSTALL_DESTINATION)
    message(FATAL_ERROR "tributary_add_plugin(${name}): NO_INSTALL and INSTALL_DESTINATION exclude each other")
  endif()
  # Sources given without the SOURCES keyword.
  set(sources ${arg_SOURCES} ${arg_UNPARSED_ARGUMENTS})
  if(NOT sources)
    message(FATAL_ERROR "tributary_add_plugin(${name} ${kind}): no source file")
  endif()
  if(NOT TARGET Tributary::plugin_sdk)
    message(FATAL_ERROR "tributary_add_plugin: Tributary::plugin_sdk is not defined (find_package(Tributary) first)")
  endif()

  string(REPLACE "-" "_" stem "${name}")
  set(target tributary_${kind}_${stem})
  add_library(${target} MODULE ${sources})
  target_link_libraries(${target} PRIVATE Tributary::plugin_sdk ${arg_LINK_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME ${target}
    POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(arg_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${arg_OUTPUT_DIRECTORY})
  endif()
  if(NOT arg_NO_INSTALL)
    if(NOT arg_INSTALL_DESTINATION)
      set(arg_INSTALL_DESTINATION lib/tributary/plugins)
    endif()
    install(TARGETS ${target} LIBRARY DESTINATION ${arg_INSTALL_DESTINATION})
  endif()
  set_property(GLOBAL APPEND PROPERTY TRIBUTARY_PLUGIN_TARGETS ${target})
  set(TRIBUTARY_PLUGIN_TARGET ${target} PARENT_SCOPE)
endfunction()
