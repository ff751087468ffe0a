#pragma once
// Class names are text: they go into metrics (JSON), reports (HTML), TensorBoard and predictions,
// all of which need valid UTF-8 (nlohmann::json refuses anything else, after an epoch's work). A
// name that is not is refused when it is packed or read, shown with its bytes escaped.
#include <string>
#include <string_view>

namespace ddp::data {

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);

// `s` for a message: bytes that are not valid UTF-8, control characters and backslashes as \xHH.
std::string escape_bytes(std::string_view s);

}  // namespace ddp::data
