# Writes the Slurm templates: OUT_DIR/NAME.sh = slurm/parts/NAME.head.sh followed by
# slurm/parts/job_body.sh from its "# ---- common body" line down (the lines above that line say
# what the file is, for whoever edits it). OUT_DIR defaults to slurm/, the templates of the source
# tree, which are committed so that a checkout runs `sbatch slurm/train_2nodes.sh` as it is:
#   cmake -P slurm/parts/assemble.cmake                  after editing a part
#   cmake -DOUT_DIR=DIR -P slurm/parts/assemble.cmake    elsewhere (the install, the test)
# A file whose text is already right is left untouched.
set(_parts "${CMAKE_CURRENT_LIST_DIR}")
if(NOT OUT_DIR)
  get_filename_component(OUT_DIR "${_parts}" DIRECTORY)
endif()
file(READ "${_parts}/job_body.sh" _body)
string(FIND "${_body}" "\n# ---- common body" _at)
if(_at LESS 0)
  message(FATAL_ERROR "${_parts}/job_body.sh: no line starting with '# ---- common body'")
endif()
math(EXPR _at "${_at} + 1")
string(SUBSTRING "${_body}" ${_at} -1 _body)
file(GLOB _heads "${_parts}/*.head.sh")
if(NOT _heads)
  message(FATAL_ERROR "${_parts}: no *.head.sh")
endif()
file(MAKE_DIRECTORY "${OUT_DIR}")
foreach(_head IN LISTS _heads)
  get_filename_component(_name "${_head}" NAME)
  string(REGEX REPLACE "\\.head\\.sh$" ".sh" _name "${_name}")
  file(READ "${_head}" _text)
  string(APPEND _text "${_body}")
  set(_out "${OUT_DIR}/${_name}")
  set(_old "")
  if(EXISTS "${_out}")
    file(READ "${_out}" _old)
  endif()
  if(NOT _old STREQUAL _text)
    file(WRITE "${_out}" "${_text}")
  endif()
  file(CHMOD "${_out}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                   WORLD_READ WORLD_EXECUTE)
endforeach()
