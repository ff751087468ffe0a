# Sourced by the test_pack_*.sh scripts after lib.sh: sets PY to a python3 that imports every module
# named, or skips the test saying which to install. python3 may be another installation (pyenv)
# than Debian's, which has the packages.
find_python() {  # find_python MODULE...
  local candidate modules
  modules=$(IFS=,; echo "$*")
  PY=""
  for candidate in python3 /usr/bin/python3; do
    # Looked up, not imported (importing torch costs seconds; a broken install then fails the test
    # that uses it, with its message, instead of skipping it).
    if "$candidate" -c "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None for m in '$modules'.split(',')))" \
      2> /dev/null; then PY=$candidate; return 0; fi
  done
  skip "no python3 with $* (apt install python3-pil python3-h5py python3-numpy python3-torchvision)"
}
