#pragma once
// How gradients travel (the [comm] section of the configuration), defined here and aggregated by
// app::Config.
namespace ddp::sync {

struct Options {
  double bucket_mb = 4.0;        // gradient all-reduce bucket cap (MiB)
  double first_bucket_mb = 1.0;  // the first (last layers') bucket, sent early
  bool overlap = true;           // start bucket all-reduces during backward
  double timeout_s = 300.0;      // a collective that does not complete in time aborts the job
};

}  // namespace ddp::sync
