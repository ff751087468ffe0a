#include "ddp/sync/exact_gradient_sum.hpp"

#include <algorithm>
#include <limits>

#include "ddp/error.hpp"
#include "ddp/sync/fixed_point_sum.hpp"

namespace ddp::sync {

ExactGradientSum::ExactGradientSum(const nn::Model& model, comm::Communicator& comm,
                                   const SyncOptions& options)
    : comm_(comm),
      communicates_(comm.size() > 1),
      overlap_(options.overlap),
      buckets_(plan_buckets(model, options.cap_bytes, options.first_cap_bytes)) {
  for (const auto& p : model.named_params())
    segments_.push_back({p.name, p.offset, p.offset + static_cast<std::size_t>(p.tensor.numel())});
  std::sort(segments_.begin(), segments_.end(),
            [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
  state_.resize(buckets_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    auto& st = state_[b];
    const auto in = [&](const Segment& s) {
      return s.begin >= buckets_[b].begin && s.begin < buckets_[b].end;
    };
    st.first_segment = static_cast<std::size_t>(
        std::find_if(segments_.begin(), segments_.end(), in) - segments_.begin());
    st.end_segment = st.first_segment;
    while (st.end_segment < segments_.size() && in(segments_[st.end_segment])) ++st.end_segment;
    st.codes.resize(st.end_segment - st.first_segment);
  }
}

void ExactGradientSum::begin(std::vector<std::span<const float>> parts,
                             std::vector<std::int64_t> chunk_ids, std::int64_t terms) {
  if (parts.size() != chunk_ids.size() || terms < 1 || std::ssize(parts) > terms)
    throw Error("internal: an exact gradient sum of " + std::to_string(parts.size()) +
                " parts with " + std::to_string(chunk_ids.size()) + " chunk numbers of " +
                std::to_string(terms));
  parts_ = std::move(parts);
  chunk_ids_ = std::move(chunk_ids);
  terms_ = terms;
  ready_ = 0;
  next_op_ = 0;
}

void ExactGradientSum::layers_done(std::size_t layer) {
  while (ready_ < buckets_.size() && layer <= buckets_[ready_].lowest_layer) ++ready_;
  if (overlapped()) advance(false);
}

void ExactGradientSum::start_max(std::size_t b) {
  auto& st = state_[b];
  for (std::size_t s = st.first_segment; s < st.end_segment; ++s) {
    const Segment& seg = segments_[s];
    std::int64_t code = fixed::kAllZero;
    for (std::size_t p = 0; p < parts_.size(); ++p) {
      const auto values = parts_[p].subspan(seg.begin, seg.end - seg.begin);
      std::int64_t c = fixed::magnitude_code(values);
      if (fixed::is_nonfinite(c)) c = fixed::nonfinite_code_of(values, chunk_ids_[p]);
      code = std::max(code, c);
    }
    st.codes[s - st.first_segment] = code;
  }
  if (communicates_) st.max_req = comm_.iallreduce_max_int64(st.codes);
}

void ExactGradientSum::start_sum(std::size_t b) {
  auto& st = state_[b];
  const Bucket& bk = buckets_[b];
  st.acc.assign(bk.end - bk.begin, 0);
  for (std::size_t s = st.first_segment; s < st.end_segment; ++s) {
    const Segment& seg = segments_[s];
    const std::int64_t code = st.codes[s - st.first_segment];
    if (fixed::is_nonfinite(code)) continue;  // nothing to sum: finish() reports it
    const int shift = fixed::shift_for(code, terms_);
    const std::size_t n = seg.end - seg.begin;
    const auto acc = std::span<std::int64_t>(st.acc).subspan(seg.begin - bk.begin, n);
    for (const auto& part : parts_) fixed::add_fixed(part.subspan(seg.begin, n), shift, acc);
  }
  if (communicates_) st.sum_req = comm_.iallreduce_sum_int64(st.acc);
}

void ExactGradientSum::advance(bool block) {
  while (next_op_ < 2 * buckets_.size()) {
    const std::size_t b = next_op_ / 2;
    if (next_op_ % 2 == 0) {
      if (b >= ready_) break;
      start_max(b);
    } else {
      auto& req = state_[b].max_req;
      if (block)
        comm_.wait(req);
      else if (!comm_.test(req))
        break;
      start_sum(b);
    }
    ++next_op_;
  }
  // Open MPI progresses non-blocking collectives only inside MPI calls: test the oldest sum.
  if (!block)
    for (std::size_t b = 0; b < next_op_ / 2; ++b)
      if (!state_[b].sum_req.empty()) {
        comm_.test(state_[b].sum_req);
        break;
      }
}

std::optional<NonFinite> ExactGradientSum::finish(std::span<float> out) {
  const auto t0 = std::chrono::steady_clock::now();
  ready_ = buckets_.size();
  advance(true);
  for (auto& st : state_) comm_.wait(st.sum_req);
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::optional<NonFinite> bad;
  std::size_t bad_at = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const auto& st = state_[b];
    for (std::size_t s = st.first_segment; s < st.end_segment; ++s) {
      const Segment& seg = segments_[s];
      const std::size_t n = seg.end - seg.begin;
      const std::int64_t code = st.codes[s - st.first_segment];
      const auto dst = out.subspan(seg.begin, n);
      if (fixed::is_nonfinite(code)) {
        std::fill(dst.begin(), dst.end(), std::numeric_limits<float>::quiet_NaN());
        // Buckets run in reverse layer order: report the tensor that comes first in the model.
        if (!bad || seg.begin < bad_at) {
          bad = NonFinite{seg.name, fixed::nonfinite_chunk(code), fixed::nonfinite_kind(code)};
          bad_at = seg.begin;
        }
        continue;
      }
      fixed::from_fixed(
          std::span<const std::int64_t>(st.acc).subspan(seg.begin - buckets_[b].begin, n),
          fixed::shift_for(code, terms_), dst);
    }
  }
  return bad;
}

}  // namespace ddp::sync
