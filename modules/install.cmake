# Install rules for the Slurm templates and the module files (issue 6). Included by the top-level
# CMakeLists.txt after include(GNUInstallDirs):
#   include(modules/install.cmake)
# Result, under the install prefix P:
#   P/bin/ddp_train                                    (top-level CMakeLists.txt)
#   P/share/ddp_train/configs/*.toml                   (top-level CMakeLists.txt)
#   P/share/ddp_train/slurm/train_{1node,2nodes,cpu}.sh, hostfile.example
#   P/modulefiles/ddp_train/<version>.lua              Lmod
#   P/modulefiles/ddp_train/<version>                  Environment Modules (Tcl; Lmod prefers the .lua)
# so that `module use P/modulefiles; module load ddp_train` works with either module system.

install(PROGRAMS ${PROJECT_SOURCE_DIR}/slurm/train_1node.sh ${PROJECT_SOURCE_DIR}/slurm/train_2nodes.sh
                 ${PROJECT_SOURCE_DIR}/slurm/train_cpu.sh
        DESTINATION ${CMAKE_INSTALL_DATADIR}/ddp_train/slurm)
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
