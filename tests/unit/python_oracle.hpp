#pragma once
// The python3 that runs the unit tests' outside oracles (torch, torchvision), found once per
// process.
#include <cstdlib>
#include <map>
#include <string>

namespace ddp::testing {

// A python3 that has every module of `modules` (space-separated), or "". Debian's first: a pyenv
// shim ahead of it on PATH costs most of a CPU-second per call. The modules are looked up, not
// imported (an import of torchvision costs seconds, and the oracle imports them anyway), and the
// answer is kept for the process: a shard runs many oracle tests.
inline std::string find_python_with(const std::string& modules) {
  static std::map<std::string, std::string> found;
  if (const auto it = found.find(modules); it != found.end()) return it->second;
  std::string answer;
  for (const char* py : {"/usr/bin/python3", "python3"}) {
    const std::string cmd = std::string(py) +
                            " -c 'import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) "
                            "for m in sys.argv[1].split()))' '" +
                            modules + "' 2>/dev/null";
    if (std::system(cmd.c_str()) == 0) {
      answer = py;
      break;
    }
  }
  return found[modules] = answer;
}

}  // namespace ddp::testing
