#pragma once
// What `ddp_train --version` reports: the program version, the backends built in and the versions
// of the libraries it runs on.
#include <string>

namespace ddp::app {

std::string build_info();

}  // namespace ddp::app
