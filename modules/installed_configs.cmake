# Run at install time (install(CODE) in modules/install.cmake): writes each configs/*.toml of
# DDP_CONFIGS_IN to DDP_CONFIGS_OUT with a data root under ../shared/data/ (the repository's
# development copy) replaced by the placeholder "/path/to/<same directory name>".
file(GLOB _names RELATIVE "${DDP_CONFIGS_IN}" "${DDP_CONFIGS_IN}/*.toml")
foreach(_name IN LISTS _names)
  file(READ "${DDP_CONFIGS_IN}/${_name}" _text)
  string(REGEX REPLACE "\"\\.\\./shared/data/([^\"]*)\"" "\"/path/to/\\1\"" _text "${_text}")
  file(WRITE "${DDP_CONFIGS_OUT}/${_name}" "${_text}")
endforeach()
