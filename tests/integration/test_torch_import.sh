#!/usr/bin/env bash
# scripts/torch_to_snapshot.py (issue 31: import parity and bad input):
#  - torchvision's resnet18 and mobilenet_v2 built with the cifar stem, random weights (seeded) and
#    the running statistics of real images, saved with torch.save(model.state_dict()), imported
#    and evaluated by `ddp_train eval --dump-logits` give torchvision's logits (float32) within
#    1e-4 on 256 real CIFAR-10 test images; inspect calls the file a weights file; eval without
#    --config says the file holds no configuration; a resume refuses it;
#  - bad input, each a clear error naming the tensor, and no file written: a .pth of another
#    architecture (named: "matches resnet34"), a missing key, an extra key, a shape that differs
#    outside the head, a missing num_batches_tracked, a value that is not finite, a --stem that
#    contradicts conv1, a file that is not a state_dict.
# Two python processes in all (each pays seconds of `import torch`): one writes every .pth file
# and then runs the CLI under test on each bad file (torch_import.py cli: torch_to_snapshot.py's
# main() with that command line, its output and exit status logged); one computes both models'
# torchvision logits. The two good imports run as commands of their own.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python torch torchvision h5py numpy
[ -f "$CIFAR/test_batch.bin" ] || skip "no CIFAR-10 at $CIFAR"
IMPORT="$SRC/scripts/torch_to_snapshot.py"
HELP="$SRC/tests/integration/torch_import.py"

cat > "$WORK/cifar.toml" << EOF
[data]
dataset = "cifar10"
root = "$CIFAR"
normalize = "config"
mean = [0.5]
std = [0.5]
test_limit = 256
limit_subset = "first"
[model]
stem = "cifar"
EOF

# Bad input: each problem named, nothing written. Each case is a command line of
# torch_to_snapshot.py, run by the python process below after it wrote the files; checked after.
bad_what=()
bad_pattern=()
bad_runs=()
expect_error() {  # expect_error WHAT PATTERN IMPORT_ARGS...
  local i=${#bad_what[@]}
  bad_what+=("$1")
  bad_pattern+=("$2")
  shift 2
  bad_runs+=(-- cli "$WORK/bad$i.log" "$@" "$WORK/bad$i.h5")
}
expect_error "another architecture" "matches resnet34 (imagenet stem): give that --preset" \
  "$WORK/resnet34.pth" --preset resnet18 --stem imagenet
expect_error "a missing key" "missing from the file: layer1.0.bn1.running_var \[64\]" "$WORK/missing.pth" --preset resnet18
expect_error "an extra key" "not in resnet18: layer1.0.extra.weight \[3\]" "$WORK/extra.pth" --preset resnet18
expect_error "a shape outside the head" \
  "layer2.0.conv1.weight: the file has \[128, 64, 1, 1\], resnet18 needs \[128, 64, 3, 3\]" "$WORK/shape.pth" --preset resnet18
expect_error "a missing num_batches_tracked" "missing from the file: layer3.1.bn2.num_batches_tracked \[\]" \
  "$WORK/tracked.pth" --preset resnet18
expect_error "a value not finite" "layer4.1.conv2.weight: 1 of 2359296 values are not finite" "$WORK/nan.pth" --preset resnet18
expect_error "a stem that contradicts conv1" "the file's conv1.weight is \[64, 3, 3, 3\], a 3x3 first convolution: the cifar stem" \
  "$WORK/resnet18.pth" --preset resnet18 --stem imagenet
echo "not a torch file" > "$WORK/text.pth"
expect_error "not a state_dict" "not a torch state_dict file" "$WORK/text.pth" --preset resnet18

# Every torch file the test reads, written by one python process (an `import torch` costs seconds;
# the files are those the separate processes wrote): the two models, a resnet34 (another
# architecture), and resnet18's file with one thing wrong in each of 5 ways; then the bad cases.
bad_kinds=(missing extra shape tracked nan)
make=(save resnet18 10 cifar "$CIFAR" "$WORK/resnet18.pth" -- save mobilenet_v2 10 cifar "$CIFAR" "$WORK/mobilenet_v2.pth"
      -- untrained resnet34 1000 imagenet "$WORK/resnet34.pth")
for kind in "${bad_kinds[@]}"; do make+=(-- bad "$kind" "$WORK/resnet18.pth" "$WORK/$kind.pth"); done
"$PY" "$HELP" "${make[@]}" "${bad_runs[@]}" || fail "saving the torch files (or running the bad cases)"

# The tool under test, and ddp_train's logits, one preset after the other.
compare=()
for preset in resnet18 mobilenet_v2; do
  "$PY" "$IMPORT" "$WORK/$preset.pth" "$WORK/$preset.h5" --preset "$preset" --stem cifar \
    > "$WORK/import.log" 2>&1 || { cat "$WORK/import.log"; fail "$preset: torch_to_snapshot.py failed"; }
  cat "$WORK/import.log"
  "$BIN" eval --snapshot "$WORK/$preset.h5" --config "$WORK/cifar.toml" --model.preset "$preset" \
    --dump-logits "$WORK/$preset.csv" --output-dir "$WORK" > "$WORK/eval.log" 2>&1 ||
    { cat "$WORK/eval.log"; fail "$preset: ddp_train eval of the imported file failed"; }
  grep "^test accuracy" "$WORK/eval.log"
  compare+=(${compare[@]+--} compare "$WORK/$preset.pth" "$preset" cifar "$CIFAR" 256 "$WORK/$preset.csv")
done
# torchvision's logits of both, in one process (compare names the preset whose logits differ).
"$PY" "$HELP" "${compare[@]}" || fail "ddp_train's logits are not torchvision's"

# What the file is, to each reader.
"$BIN" inspect "$WORK/resnet18.h5" > "$WORK/inspect.log" 2>&1 || { cat "$WORK/inspect.log"; fail "inspect failed"; }
grep -q "^weights file  imported from $WORK/resnet18.pth by torch_to_snapshot.py" "$WORK/inspect.log" ||
  { cat "$WORK/inspect.log"; fail "inspect does not call it a weights file"; }
if "$BIN" eval --snapshot "$WORK/resnet18.h5" > "$WORK/noconfig.log" 2>&1; then fail "eval without --config ran"; fi
grep -q "weights file.*give .*--config" "$WORK/noconfig.log" || { cat "$WORK/noconfig.log"; fail "eval without --config: no clear error"; }
if "$BIN" --config "$WORK/cifar.toml" --model.preset resnet18 --run-dir "$WORK/resume" --train.epochs 1 \
  --data.train_limit 64 --train.resume "$WORK/resnet18.h5" > "$WORK/resume.log" 2>&1; then
  fail "a resume from a weights file ran"
fi
grep -q "is a weights file (imported from $WORK/resnet18.pth), not a run's snapshot.*train.init" "$WORK/resume.log" ||
  { cat "$WORK/resume.log"; fail "resume from a weights file: no clear error"; }

# The bad cases run above: each exited non-zero naming the problem, and wrote nothing.
for i in "${!bad_what[@]}"; do
  what=${bad_what[$i]} pattern=${bad_pattern[$i]} log=$WORK/bad$i.log
  [ -f "$log" ] || fail "$what: not run"
  tail -n 1 "$log" | grep -q '^exit [1-9]' || { cat "$log"; fail "$what: imported"; }
  grep -q -- "$pattern" "$log" || { cat "$log"; fail "$what: the error does not say '$pattern'"; }
  [ ! -e "$WORK/bad$i.h5" ] && ! ls "$WORK"/.bad$i.h5.tmp.* > /dev/null 2>&1 || fail "$what: a file was written"
  echo "  $what: $(grep -m1 -- "$pattern" "$log")"
done
grep -q "not in resnet18: layer1.2.conv1.weight \[64, 64, 3, 3\]" "$WORK/bad0.log" || fail "another architecture: the keys are not named"
pass "resnet18 and mobilenet_v2 imports give torchvision's logits within 1e-4 on 256 CIFAR-10 images; bad files are named"
