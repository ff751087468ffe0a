#include "ddp/runtime/singleton.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace ddp::runtime {
namespace {

bool set_in_environment(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

// Where Open MPI puts session directories when not told otherwise (opal_tmp_directory).
std::string temporary_directory() {
  for (const char* name : {"TMPDIR", "TEMP", "TMP"})
    if (set_in_environment(name)) return std::getenv(name);
  return "/tmp";
}

}  // namespace

void prepare_singleton_environment() {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK")) return;
  setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
  // Only an isolated singleton has the shared name; one with an orted gets a hashed job family.
  if (std::string(std::getenv("OMPI_MCA_ess_singleton_isolated")) != "1") return;
  if (set_in_environment("OMPI_MCA_orte_top_session_dir") ||
      set_in_environment("OMPI_MCA_orte_tmpdir_base"))
    return;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  // Open MPI's own name with the pid added; it creates the directory and removes it at exit.
  const std::string dir = temporary_directory() + "/ompi." + host + "." + std::to_string(getuid()) +
                          ".pid." + std::to_string(getpid());
  setenv("OMPI_MCA_orte_top_session_dir", dir.c_str(), 1);
}

}  // namespace ddp::runtime
