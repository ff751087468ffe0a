#pragma once
// One field of a CSV file we write (predictions, confusion matrices): quoted as RFC 4180 asks
// when it holds a comma, a quote or a line break (class names and file paths may).
#include <string>

namespace ddp::io {

inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace ddp::io
