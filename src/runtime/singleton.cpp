#include "ddp/runtime/singleton.hpp"

#include <strings.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace ddp::runtime {
namespace {

const char* set_in_environment(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Open MPI's reading of a boolean MCA value.
bool is_true(const char* v) {
  for (const char* yes : {"1", "true", "yes", "t", "y", "enabled"})
    if (strcasecmp(v, yes) == 0) return true;
  return false;
}

// Where Open MPI puts session directories: orte_tmpdir_base, else opal_tmp_directory().
std::string session_base() {
  for (const char* name : {"OMPI_MCA_orte_tmpdir_base", "TMPDIR", "TEMP", "TMP"})
    if (const char* v = set_in_environment(name)) return v;
  return "/tmp";
}

}  // namespace

void prepare_singleton_environment() {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK")) return;
  setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
  // Only an isolated singleton has the shared name; one with an orted gets a hashed job family.
  const char* isolated = std::getenv("OMPI_MCA_ess_singleton_isolated");
  if (!isolated || !is_true(isolated)) return;
  if (set_in_environment("OMPI_MCA_orte_top_session_dir")) return;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string node = host;
  node = node.substr(0, node.find('.'));  // as Open MPI names the node (orte_keep_fqdn_hostnames)
  // Open MPI's own name with the pid added; it creates the directory and removes it at exit.
  const std::string dir = session_base() + "/ompi." + node + "." + std::to_string(getuid()) +
                          ".pid." + std::to_string(getpid());
  setenv("OMPI_MCA_orte_top_session_dir", dir.c_str(), 1);
}

}  // namespace ddp::runtime
