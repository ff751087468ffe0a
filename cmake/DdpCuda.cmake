# The CUDA backend (issue 5): cuDNN + cuBLAS kernels, NCCL communicator, GPU benchmark.
#
# Included once from the top-level CMakeLists.txt, after the ddp_core target exists:
#
#   include(cmake/DdpCuda.cmake)
#
# DDP_CUDA (cache, AUTO | ON | OFF):
#   AUTO  build the backend when nvcc, cuDNN (>= 9), NCCL (>= 2.14) and cuBLAS are all found;
#         otherwise say which of them is missing and build without it.
#   ON    the same, but a missing piece is a configuration error that names it.
#   OFF   nothing is looked for.
#
# What it defines:
#   DDP_HAVE_CUDA        ON when the backend is built (a variable for the rest of the build).
#   ddp_cuda             the plugin libddp_cuda.so (a MODULE library) of src/backend/cuda/*.cu,
#                        src/comm/*.cu and src/plugin/*.cu, next to ddp_train in the build tree and
#                        installed to CMAKE_INSTALL_LIBDIR. Only it links cudart, cuBLAS, cuDNN and
#                        NCCL; ddp_core loads it with dlopen (src/plugin/cuda_plugin.cpp), so
#                        ddp_train runs on nodes without those libraries, and refuses it unless its
#                        interface hash is ddp_core's (cmake/PluginInterface.cmake, included here
#                        whether or not the backend is built). It takes what it uses of ddp_core from the
#                        executable that loads it: such executables need ENABLE_EXPORTS (ddp_train,
#                        the unit tests, gpu_bench). ddp_core users get the compile definition
#                        DDP_HAVE_CUDA=1 (the plugin is built in this tree).
#   ddp_cuda_target(T)   applies our CUDA settings (architectures, C++20, warnings as errors) to
#                        another target with .cu sources (bench/gpu_bench).
#   ddp_cuda_add_tests(T [LABELS ...])
#                        registers the multi-rank NCCL tests of the unit-test binary T: one rank per
#                        GPU the test sees (scripts/visible_gpus.sh, CUDA_VISIBLE_DEVICES honoured)
#                        under mpiexec (skipped, exit 77, without a GPU).
#
# Hints for finding the libraries: CUDNN_ROOT / NCCL_ROOT (CMake or environment variables), or
# CUDNN_INCLUDE_DIR / CUDNN_LIBRARY / NCCL_INCLUDE_DIR / NCCL_LIBRARY directly. nvcc is taken from
# CMAKE_CUDA_COMPILER, CUDACXX, the PATH, CUDA_HOME/CUDA_PATH or /usr/local/cuda, in that order.

include_guard(GLOBAL)

include(${CMAKE_CURRENT_LIST_DIR}/PluginInterface.cmake)

set(DDP_HAVE_CUDA OFF)
string(TOUPPER "${DDP_CUDA}" _ddp_cuda_mode)
if(_ddp_cuda_mode MATCHES "^(1|TRUE|YES)$")
  set(_ddp_cuda_mode ON)
elseif(_ddp_cuda_mode MATCHES "^(0|FALSE|NO)$")
  set(_ddp_cuda_mode OFF)
endif()
if(NOT _ddp_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DDP_CUDA='${DDP_CUDA}': expected AUTO, ON or OFF")
endif()

function(ddp_cuda_add_tests target)
endfunction()
function(ddp_cuda_target target)
endfunction()

if(_ddp_cuda_mode STREQUAL "OFF")
  message(STATUS "ddp_train: CUDA backend OFF (DDP_CUDA=OFF)")
  return()
endif()

# --- what is missing, collected so that AUTO can say it and ON can fail with it -------------------
set(_ddp_cuda_missing "")

# nvcc. check_language(CUDA) looks at CUDACXX and the PATH; a toolkit in its usual place but not
# on the PATH (a fresh CI image) is found too.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(DDP_NVCC nvcc NO_CACHE
               HINTS ENV CUDA_HOME ENV CUDA_PATH ENV CUDAToolkit_ROOT
               PATHS /usr/local/cuda
               PATH_SUFFIXES bin)
  if(DDP_NVCC)
    set(CMAKE_CUDA_COMPILER "${DDP_NVCC}" CACHE FILEPATH "CUDA compiler")
  endif()
endif()
# nvcc compiles host code with the same compiler as the rest of the project (one ABI).
if(NOT CMAKE_CUDA_HOST_COMPILER AND NOT DEFINED ENV{CUDAHOSTCXX} AND CMAKE_CXX_COMPILER)
  set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH "Host compiler of nvcc")
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  list(APPEND _ddp_cuda_missing
       "nvcc (no CUDA compiler: set CUDACXX or CMAKE_CUDA_COMPILER, or put the toolkit's bin/ on the PATH)")
else()
  # Our CUDA sources are C++20: nvcc >= 12.0.
  execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --version OUTPUT_VARIABLE _ddp_nvcc_out
                  ERROR_QUIET RESULT_VARIABLE _ddp_nvcc_rc)
  string(REGEX MATCH "release ([0-9]+\\.[0-9]+)" _ddp_nvcc_match "${_ddp_nvcc_out}")
  set(_ddp_nvcc_version "${CMAKE_MATCH_1}")
  if(NOT _ddp_nvcc_rc EQUAL 0 OR NOT _ddp_nvcc_version)
    list(APPEND _ddp_cuda_missing "a working nvcc (${CMAKE_CUDA_COMPILER} --version failed)")
  elseif(_ddp_nvcc_version VERSION_LESS 12.0)
    list(APPEND _ddp_cuda_missing
         "nvcc >= 12.0 for C++20 (${CMAKE_CUDA_COMPILER} is CUDA ${_ddp_nvcc_version})")
  endif()
endif()

# The toolkit's libraries (cudart, cuBLAS) from the toolkit nvcc belongs to.
if(CMAKE_CUDA_COMPILER)
  if(NOT CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT})
    get_filename_component(_ddp_nvcc_real "${CMAKE_CUDA_COMPILER}" REALPATH)
    get_filename_component(_ddp_nvcc_bin "${_ddp_nvcc_real}" DIRECTORY)
    get_filename_component(CUDAToolkit_ROOT "${_ddp_nvcc_bin}" DIRECTORY)
  endif()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    list(APPEND _ddp_cuda_missing "the CUDA toolkit libraries (cudart) next to ${CMAKE_CUDA_COMPILER}")
  elseif(NOT TARGET CUDA::cublas)
    list(APPEND _ddp_cuda_missing "cuBLAS (libcublas in ${CUDAToolkit_LIBRARY_DIR})")
  endif()
endif()

# cuDNN >= 9: the header and libcudnn (the v9 front library, which loads its sub-libraries).
set(_ddp_cuda_hints "")
foreach(_v CUDNN_ROOT NCCL_ROOT)
  if(DEFINED ${_v})
    list(APPEND _ddp_cuda_hints "${${_v}}")
  endif()
  if(DEFINED ENV{${_v}})
    list(APPEND _ddp_cuda_hints "$ENV{${_v}}")
  endif()
endforeach()
foreach(_v CUDA_HOME CUDA_PATH)
  if(DEFINED ENV{${_v}})
    list(APPEND _ddp_cuda_hints "$ENV{${_v}}")
  endif()
endforeach()
list(APPEND _ddp_cuda_hints /usr/local/cuda /opt/cuda)
if(CUDAToolkit_FOUND)
  list(APPEND _ddp_cuda_hints "${CUDAToolkit_LIBRARY_ROOT}")
  get_filename_component(_ddp_tk_inc_parent "${CUDAToolkit_INCLUDE_DIRS}" DIRECTORY)
  list(APPEND _ddp_cuda_hints "${_ddp_tk_inc_parent}")
endif()
find_path(CUDNN_INCLUDE_DIR cudnn_version.h HINTS ${_ddp_cuda_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include include/x86_64-linux-gnu include/aarch64-linux-gnu)
find_library(CUDNN_LIBRARY cudnn HINTS ${_ddp_cuda_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib64 lib lib/x64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu)
if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY OR NOT EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  list(APPEND _ddp_cuda_missing "cuDNN (cudnn_version.h / libcudnn: set CUDNN_ROOT)")
else()
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _ddp_cudnn_major REGEX "^#define CUDNN_MAJOR ")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _ddp_cudnn_minor REGEX "^#define CUDNN_MINOR ")
  string(REGEX REPLACE "[^0-9]" "" _ddp_cudnn_major "${_ddp_cudnn_major}")
  string(REGEX REPLACE "[^0-9]" "" _ddp_cudnn_minor "${_ddp_cudnn_minor}")
  set(DDP_CUDNN_VERSION "${_ddp_cudnn_major}.${_ddp_cudnn_minor}")
  if(_ddp_cudnn_major LESS 9)
    list(APPEND _ddp_cuda_missing
         "cuDNN >= 9 (found ${DDP_CUDNN_VERSION} in ${CUDNN_INCLUDE_DIR}: set CUDNN_ROOT)")
  endif()
endif()

# NCCL >= 2.14 (non-blocking communicators, ncclCommFinalize, ncclGetLastError).
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_ddp_cuda_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl HINTS ${_ddp_cuda_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu lib/aarch64-linux-gnu)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY OR NOT EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  list(APPEND _ddp_cuda_missing "NCCL (nccl.h / libnccl: set NCCL_ROOT)")
else()
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _ddp_nccl_major REGEX "^#define NCCL_MAJOR ")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _ddp_nccl_minor REGEX "^#define NCCL_MINOR ")
  string(REGEX REPLACE "[^0-9]" "" _ddp_nccl_major "${_ddp_nccl_major}")
  string(REGEX REPLACE "[^0-9]" "" _ddp_nccl_minor "${_ddp_nccl_minor}")
  set(DDP_NCCL_VERSION "${_ddp_nccl_major}.${_ddp_nccl_minor}")
  if(_ddp_nccl_major LESS 2 OR (_ddp_nccl_major EQUAL 2 AND _ddp_nccl_minor LESS 14))
    list(APPEND _ddp_cuda_missing "NCCL >= 2.14 (found ${DDP_NCCL_VERSION} in ${NCCL_INCLUDE_DIR})")
  endif()
endif()

if(_ddp_cuda_missing)
  list(JOIN _ddp_cuda_missing "; " _ddp_cuda_missing_text)
  if(_ddp_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "DDP_CUDA=ON, but the CUDA backend cannot be built: missing "
                        "${_ddp_cuda_missing_text}. Install them, point CMake at them, or configure "
                        "with -DDDP_CUDA=AUTO/OFF.")
  endif()
  message(STATUS "ddp_train: CUDA backend OFF (DDP_CUDA=AUTO): missing ${_ddp_cuda_missing_text}")
  return()
endif()

# --- architectures ---------------------------------------------------------------------------------
# Volta (70) to Hopper (90) unless the user chose (CMAKE_CUDA_ARCHITECTURES or CUDAARCHS). CUDA 13
# dropped Volta (and everything before Turing), so with CUDA >= 13 the default starts at Turing (75);
# "90" also embeds compute_90 PTX, which newer GPUs (Blackwell) JIT-compile at first use.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  set(_ddp_cuda_archs_default ON)
endif()
enable_language(CUDA)
# CMake < 3.26 does not know nvcc's C++20 flag (nvcc >= 12 has it); without it, any target with
# CUDA sources and the project's C++20 fails to generate ("requires the language dialect CUDA20").
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA")
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
if(_ddp_cuda_archs_default)
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 13.0)
    set(_ddp_archs "75;80;86;89;90")
  elseif(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 11.8)
    set(_ddp_archs "70;75;80;86;89;90")
  else()
    set(_ddp_archs "70;75;80;86")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${_ddp_archs}" CACHE STRING "CUDA architectures to build for" FORCE)
endif()
string(REPLACE ";" "," _ddp_archs_text "${CMAKE_CUDA_ARCHITECTURES}")

# --- our settings for targets with CUDA sources ----------------------------------------------------
# nvcc: every warning is an error (--Werror all-warnings), and the host compiler gets the project's
# warnings (DDP_WARNINGS) and -Werror for the host side of the .cu files, less -Wpedantic, which
# rejects the GCC-style line directives of nvcc's generated code. --expt-relaxed-constexpr lets device code call ddp/rng.hpp's constexpr hash, so the
# dropout masks are the CPU's bit for bit. --fmad=false keeps our element-wise kernels (optimizer
# updates, loss gradient) from contracting a*b+c into FMAs, so they round exactly like the CPU code;
# they are memory-bound, FMAs would not make them faster. cuDNN/cuBLAS are unaffected.
function(ddp_cuda_target target)
  set_target_properties(${target} PROPERTIES
    CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
    CUDA_RUNTIME_LIBRARY Shared
    CUDA_SEPARABLE_COMPILATION OFF)
  # C++20: std::span, defaulted comparisons in our headers.
  set_target_properties(${target} PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON
                                             CUDA_EXTENSIONS OFF)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings --expt-relaxed-constexpr --fmad=false
                               -Xcompiler=-Wall,-Wextra,-Wshadow,-Wconversion,-Wno-sign-conversion,-Werror>)
  target_compile_definitions(${target} PRIVATE DDP_CUDA_ARCHS="${_ddp_archs_text}")
  target_include_directories(${target} SYSTEM PRIVATE ${CUDNN_INCLUDE_DIR} ${NCCL_INCLUDE_DIR})
endfunction()

file(GLOB DDP_CUDA_SOURCES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/backend/cuda/*.cu ${PROJECT_SOURCE_DIR}/src/comm/*.cu
     ${PROJECT_SOURCE_DIR}/src/plugin/*.cu)
add_library(ddp_cuda MODULE ${DDP_CUDA_SOURCES})
ddp_cuda_target(ddp_cuda)
add_dependencies(ddp_cuda ddp_plugin_interface)
# Hidden visibility: the plugin's definitions of the functions of cuda_backend.hpp / nccl_comm.hpp
# bind inside it (ddp_core has same-named ones that call through its table); only
# ddp_cuda_plugin_table (src/plugin/plugin_entry.cu) is exported. ddp_core is not linked:
# its symbols come from the executable (ENABLE_EXPORTS), one copy of them in the process.
set_target_properties(ddp_cuda PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
  CUDA_VISIBILITY_PRESET hidden
  INSTALL_RPATH_USE_LINK_PATH ON)
target_include_directories(ddp_cuda PRIVATE $<TARGET_PROPERTY:ddp_core,INTERFACE_INCLUDE_DIRECTORIES>)
target_compile_definitions(ddp_cuda PRIVATE $<TARGET_PROPERTY:ddp_core,INTERFACE_COMPILE_DEFINITIONS>)
target_link_libraries(ddp_cuda PRIVATE CUDA::cudart CUDA::cublas ${CUDNN_LIBRARY} ${NCCL_LIBRARY}
                                       MPI::MPI_C)
target_compile_definitions(ddp_core PUBLIC DDP_HAVE_CUDA=1)
install(TARGETS ddp_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
set(DDP_HAVE_CUDA ON)

function(ddp_cuda_add_tests target)
  cmake_parse_arguments(ARG "" "" "LABELS" ${ARGN})
  if(NOT MPIEXEC_EXECUTABLE)
    message(STATUS "ddp_train: no mpiexec, multi-rank NCCL tests not registered")
    return()
  endif()
  # One rank per GPU this process sees (scripts/visible_gpus.sh: nvidia-smi's list narrowed by
  # CUDA_VISIBLE_DEVICES, as CUDA narrows it); the test binary itself skips when there is none.
  # Extra launcher flags (e.g. --mca btl ...) come from the environment variable MPIEXEC_EXTRA.
  set(_script [=[
n=$(sh "$2")
if [ "${n:-0}" -lt 1 ]; then echo "SKIPPED: no CUDA device visible (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES hides them)"; exit 77; fi
exec "$0" -n "$n" $MPIEXEC_EXTRA "$1" --gtest_filter='CudaNccl*'
]=])
  # The test binary finds the plugin through DDP_CUDA_PLUGIN (it is not beside it).
  add_test(NAME cuda.nccl_one_rank_per_gpu
           COMMAND sh -c "${_script}" "${MPIEXEC_EXECUTABLE}" $<TARGET_FILE:${target}>
                   "${PROJECT_SOURCE_DIR}/scripts/visible_gpus.sh")
  set(_labels gpu)
  if(ARG_LABELS)
    list(APPEND _labels ${ARG_LABELS})
  endif()
  set_tests_properties(cuda.nccl_one_rank_per_gpu PROPERTIES
                       LABELS "${_labels}" SKIP_RETURN_CODE 77 TIMEOUT 600
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;DDP_CUDA_PLUGIN=$<TARGET_FILE:ddp_cuda>")
endfunction()

set(_ddp_arch_note "")
if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 13.0)
  set(_ddp_arch_note " (CUDA 13 has no Volta/sm_70: build with CUDA 12 for V100s)")
endif()
message(STATUS "ddp_train: CUDA backend ON (DDP_CUDA=${_ddp_cuda_mode}): nvcc "
               "${CMAKE_CUDA_COMPILER_VERSION}, cuDNN ${DDP_CUDNN_VERSION}, NCCL ${DDP_NCCL_VERSION}, "
               "architectures ${CMAKE_CUDA_ARCHITECTURES}${_ddp_arch_note}")
