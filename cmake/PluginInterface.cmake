# The CUDA plugin's interface hash (include/ddp/plugin/cuda_plugin.hpp): a SHA-256 of every header
# of ours (include/ddp/...) that the plugin's sources reach, which the loader in ddp_core and the
# plugin's table both carry, so that a plugin built from another interface is refused instead of
# calling through vtables that no longer match. Computed at build time by
# cmake/plugin_interface_hash.cmake into generated/ddp/plugin/interface_hash.hpp: an edit of any
# header re-runs it (not only a re-configure), and the file is rewritten only when the hash
# changes, so only the two files that include it recompile then.
#
# Included once from cmake/DdpCuda.cmake, whether or not the CUDA backend is built (the loader is
# always in ddp_core). Defines the target ddp_plugin_interface, which ddp_core (and ddp_cuda)
# depend on.

include_guard(GLOBAL)

set(_ddp_pi_dir ${CMAKE_CURRENT_BINARY_DIR}/generated)
set(_ddp_pi_header ${_ddp_pi_dir}/ddp/plugin/interface_hash.hpp)
set(_ddp_pi_stamp ${_ddp_pi_dir}/plugin_interface.stamp)
# The script finds the plugin's sources and follows their includes itself; these lists only say
# when to run it again (a superset: any header of ours, any source of the plugin).
file(GLOB_RECURSE _ddp_pi_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/ddp/*.hpp)
file(GLOB _ddp_pi_sources CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/backend/cuda/* ${PROJECT_SOURCE_DIR}/src/comm/*.cu
     ${PROJECT_SOURCE_DIR}/src/comm/*.hpp ${PROJECT_SOURCE_DIR}/src/plugin/*.cu)
add_custom_command(
  OUTPUT ${_ddp_pi_stamp}
  BYPRODUCTS ${_ddp_pi_header}
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${_ddp_pi_header}
          -P ${PROJECT_SOURCE_DIR}/cmake/plugin_interface_hash.cmake
  COMMAND ${CMAKE_COMMAND} -E touch ${_ddp_pi_stamp}
  DEPENDS ${_ddp_pi_headers} ${_ddp_pi_sources} ${PROJECT_SOURCE_DIR}/cmake/plugin_interface_hash.cmake
  COMMENT "Hashing the CUDA plugin's interface headers"
  VERBATIM)
add_custom_target(ddp_plugin_interface DEPENDS ${_ddp_pi_stamp})
add_dependencies(ddp_core ddp_plugin_interface)
