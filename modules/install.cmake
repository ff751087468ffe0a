# Install rules for the Slurm templates and the module files (issue 6). Included by the top-level
# CMakeLists.txt after include(GNUInstallDirs):
#   include(modules/install.cmake)
# Result, under the install prefix P:
#   P/bin/ddp_train                                    (top-level CMakeLists.txt)
#   P/share/ddp_train/configs/*.toml                   data.root of the repository's development
#                                                      copy rewritten to a placeholder (below)
#   P/share/ddp_train/slurm/train_{1node,2nodes,cpu}.sh assembled from slurm/parts/ (below),
#                          hostfile.example
#   P/modulefiles/ddp_train/<version>.lua              Lmod
#   P/modulefiles/ddp_train/<version>                  Environment Modules (Tcl; Lmod prefers the .lua)
# so that `module use P/modulefiles; module load ddp_train` works with either module system.

# The templates are assembled from their one source, slurm/parts/ (a head per template, one shared
# body), at install time by the script that writes the repository's own slurm/train_*.sh.
file(GLOB _ddp_heads CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/slurm/parts
     ${PROJECT_SOURCE_DIR}/slurm/parts/*.head.sh)
list(TRANSFORM _ddp_heads REPLACE "\\.head\\.sh$" ".sh")
set(_ddp_slurm_dir ${PROJECT_BINARY_DIR}/slurm_templates)
install(CODE "
  set(OUT_DIR \"${_ddp_slurm_dir}\")
  include(\"${PROJECT_SOURCE_DIR}/slurm/parts/assemble.cmake\")
")
list(TRANSFORM _ddp_heads PREPEND ${_ddp_slurm_dir}/)
install(PROGRAMS ${_ddp_heads} DESTINATION ${CMAKE_INSTALL_DATADIR}/ddp_train/slurm)
unset(_ddp_heads)
unset(_ddp_slurm_dir)
install(FILES ${PROJECT_SOURCE_DIR}/slurm/hostfile.example
        DESTINATION ${CMAKE_INSTALL_DATADIR}/ddp_train/slurm)

# The module files name the install prefix, which `cmake --install BUILD --prefix P` can change
# after configuring: fill it in at install time (CMAKE_INSTALL_PREFIX inside install(CODE) is the
# install-time prefix), then install the results like any file (DESTDIR and install_manifest.txt
# work as usual).
set(_ddp_mod_dir ${PROJECT_BINARY_DIR}/modulefiles)
install(CODE "
  set(DDP_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(DDP_VERSION \"${PROJECT_VERSION}\")
  set(DDP_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(DDP_DATADIR \"${CMAKE_INSTALL_DATADIR}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/modules/ddp_train.lua\" \"${_ddp_mod_dir}/${PROJECT_VERSION}.lua\" @ONLY)
  configure_file(\"${PROJECT_SOURCE_DIR}/modules/ddp_train.tcl\" \"${_ddp_mod_dir}/${PROJECT_VERSION}\" @ONLY)
")
install(FILES ${_ddp_mod_dir}/${PROJECT_VERSION}.lua ${_ddp_mod_dir}/${PROJECT_VERSION}
        DESTINATION modulefiles/ddp_train)
unset(_ddp_mod_dir)

# The example configs: in the repository a data.root under ../shared/data/ names the development
# copy beside the checkout (the tests use it), which no user of an installation has. Installed, it
# becomes the placeholder "/path/to/<dataset dir>", which the data readers recognise in their error
# ("... is the placeholder of an installed example config: set data.root ... --data.root DIR").
# Rewritten at install time, like the module files; these replace the plain copies of the
# top-level install(DIRECTORY configs/ ...) rule, which runs before this file's rules.
file(GLOB _ddp_configs CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/configs ${PROJECT_SOURCE_DIR}/configs/*.toml)
set(_ddp_cfg_dir ${PROJECT_BINARY_DIR}/installed_configs)
install(CODE "
  set(DDP_CONFIGS_IN \"${PROJECT_SOURCE_DIR}/configs\")
  set(DDP_CONFIGS_OUT \"${_ddp_cfg_dir}\")
  include(\"${PROJECT_SOURCE_DIR}/modules/installed_configs.cmake\")
")
list(TRANSFORM _ddp_configs PREPEND ${_ddp_cfg_dir}/)
install(FILES ${_ddp_configs} DESTINATION ${CMAKE_INSTALL_DATADIR}/ddp_train/configs)
unset(_ddp_configs)
unset(_ddp_cfg_dir)
