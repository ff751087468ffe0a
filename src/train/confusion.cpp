#include "ddp/train/confusion.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>

#include "ddp/io/csv_field.hpp"

namespace ddp::train {

Confusion::Confusion(std::int64_t classes)
    : classes_(classes),
      matrix_(classes <= kMatrixClasses),
      counts_(static_cast<std::size_t>(matrix_ ? classes * classes : 2 * classes), 0) {}

void Confusion::add(const float* logits, const std::int32_t* labels, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes_;
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < classes_; ++c)
      if (row[c] > row[best]) best = c;
    const std::int64_t truth = labels[i];
    if (matrix_) {
      ++counts_[static_cast<std::size_t>(truth * classes_ + best)];
    } else {
      counts_[static_cast<std::size_t>(truth)] += best == truth;
      ++counts_[static_cast<std::size_t>(classes_ + truth)];
    }
  }
}

void Confusion::allreduce(comm::Communicator& comm) {
  if (comm.size() > 1) comm.allreduce_sum(std::span<std::int64_t>(counts_));
}

std::int64_t Confusion::correct(std::int64_t truth) const {
  return matrix_ ? count(truth, truth) : counts_[static_cast<std::size_t>(truth)];
}

std::int64_t Confusion::samples(std::int64_t truth) const {
  if (!matrix_) return counts_[static_cast<std::size_t>(classes_ + truth)];
  std::int64_t n = 0;
  for (std::int64_t p = 0; p < classes_; ++p) n += count(truth, p);
  return n;
}

double Confusion::accuracy(std::int64_t truth) const {
  const auto n = samples(truth);
  return n > 0 ? static_cast<double>(correct(truth)) / static_cast<double>(n) : 0.0;
}

std::string Confusion::json_fields(const std::vector<std::string>& names) const {
  auto per_class = nlohmann::json::array();
  auto matrix = nlohmann::json::array();
  for (std::int64_t t = 0; t < classes_; ++t) {
    per_class.push_back({{"class", names.at(static_cast<std::size_t>(t))},
                         {"accuracy", accuracy(t)},
                         {"samples", samples(t)}});
    if (!matrix_) continue;
    auto row = nlohmann::json::array();
    for (std::int64_t p = 0; p < classes_; ++p) row.push_back(count(t, p));
    matrix.push_back(std::move(row));
  }
  std::string out = ", \"per_class\": " + per_class.dump();
  if (matrix_) out += ", \"confusion\": " + matrix.dump();
  return out;
}

std::string Confusion::csv(const std::vector<std::string>& names) const {
  if (!matrix_) {
    std::string out = "class,correct,samples,accuracy\n";
    for (std::int64_t t = 0; t < classes_; ++t) {
      char acc[32];
      std::snprintf(acc, sizeof acc, "%.6f", accuracy(t));
      out += io::csv_field(names.at(static_cast<std::size_t>(t))) + "," +
             std::to_string(correct(t)) + "," + std::to_string(samples(t)) + "," + acc + "\n";
    }
    return out;
  }
  std::string out = "true\\predicted";
  for (std::int64_t p = 0; p < classes_; ++p) {
    out += ',';
    out += io::csv_field(names.at(static_cast<std::size_t>(p)));
  }
  out += "\n";
  for (std::int64_t t = 0; t < classes_; ++t) {
    out += io::csv_field(names.at(static_cast<std::size_t>(t)));
    for (std::int64_t p = 0; p < classes_; ++p) {
      out += ',';
      out += std::to_string(count(t, p));
    }
    out += "\n";
  }
  return out;
}

std::string Confusion::table(const std::vector<std::string>& names) const {
  std::size_t width = 5;
  for (const auto& n : names) width = std::max(width, n.size());
  std::string out;
  for (std::int64_t t = 0; t < classes_; ++t) {
    char line[96];
    std::snprintf(line, sizeof line, " %7.2f%%  (%lld/%lld)\n", 100.0 * accuracy(t),
                  static_cast<long long>(correct(t)), static_cast<long long>(samples(t)));
    const auto& name = names.at(static_cast<std::size_t>(t));
    out += "  " + name + std::string(width - name.size(), ' ') + line;
  }
  return out;
}

}  // namespace ddp::train
