#!/usr/bin/env bash
# Same seed twice -> bitwise-identical final weights and identical metrics (timing aside), with
# augmentation and shuffling on; another seed -> different weights.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
common=(--config "$FASHION_CONFIG" --data.train_limit 3000 --data.test_limit 1000
        --train.epochs 2 --train.batch_size 100 --data.augment true --runtime.threads 2)
"$BIN" "${common[@]}" --run-dir "$WORK/a" > "$WORK/a.log"
"$BIN" "${common[@]}" --run-dir "$WORK/b" > "$WORK/b.log"
"$BIN" "${common[@]}" --run-dir "$WORK/c" --train.seed 7 > "$WORK/c.log"
da=$(summary_field "$WORK/a/metrics.jsonl" weights_digest)
db=$(summary_field "$WORK/b/metrics.jsonl" weights_digest)
dc=$(summary_field "$WORK/c/metrics.jsonl" weights_digest)
[ -n "$da" ] || fail "no weights digest in the summary"
[ "$da" = "$db" ] || fail "same seed gave different weights: $da vs $db"
[ "$da" != "$dc" ] || fail "a different seed gave the same weights"
diff <(metrics_without_timing "$WORK/a/metrics.jsonl") <(metrics_without_timing "$WORK/b/metrics.jsonl") \
  || fail "same seed gave different metrics"
pass "same seed -> identical weights ($da) and metrics"
