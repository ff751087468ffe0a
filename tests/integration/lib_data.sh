# The dataset for the tests that compare runs with each other (test_mpi_equivalence,
# test_mpi_batchnorm), so that they run on a fresh clone too: the real CIFAR-10 beside the checkout
# when it is there, else Fashion-MNIST (scripts/setup.sh installs it), else CIFAR-10-format files
# generated here. What these tests assert (N ranks == 1 rank, replicas agree, a snapshot evaluates as
# the run reported) holds on any data, so the fallbacks test the same thing.
# DDP_TEST_CIFAR and DDP_TEST_FASHION override the two paths: point them at a missing directory to
# exercise a fallback. Source after lib.sh.

# pick_comparison_data MIN_TRAIN MIN_TEST: sets DATA (--data.* options to add after --config) and
# DATA_NAME, and prints which dataset the test uses.
pick_comparison_data() {
  local cifar=${DDP_TEST_CIFAR:-$CIFAR} fashion=${DDP_TEST_FASHION:-$FASHION}
  if [ -f "$cifar/test_batch.bin" ]; then
    DATA=(--data.dataset cifar10 --data.root "$cifar")
    DATA_NAME="CIFAR-10 from $cifar"
  elif [ -f "$fashion/t10k-labels-idx1-ubyte.gz" ] || [ -f "$fashion/t10k-labels-idx1-ubyte" ]; then
    # One channel: the configs' per-channel CIFAR normalisation does not fit.
    DATA=(--data.dataset fashion_mnist --data.root "$fashion" --data.mean 0.5 --data.std 0.5)
    DATA_NAME="Fashion-MNIST from $fashion (no CIFAR-10 at $cifar)"
  else
    command -v python3 > /dev/null ||
      skip "no CIFAR-10 at $cifar, no Fashion-MNIST at $fashion, and no python3 to generate data"
    # The CIFAR-10 binary format (1 label byte + 3x32x32 pixels): each class a random picture with
    # a third of it overwritten by noise at a random place, so that there is something to learn
    # (accuracy well above chance) and a wrong evaluation shows.
    mkdir -p "$WORK/generated"
    python3 - "$WORK/generated" "$1" "$2" << 'EOF'
import os, random, sys
out, train, test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(42)
classes = [rng.randbytes(3072) for _ in range(10)]
per_file = -(-train // 5)
files = [("data_batch_%d.bin" % i, per_file) for i in range(1, 6)] + [("test_batch.bin", test)]
for name, n in files:
    with open(os.path.join(out, name), "wb") as f:
        for _ in range(n):
            label = rng.randrange(10)
            image = bytearray(classes[label])
            at = rng.randrange(3072 - 1024)
            image[at:at + 1024] = rng.randbytes(1024)
            f.write(bytes([label]) + image)
EOF
    DATA=(--data.dataset cifar10 --data.root "$WORK/generated")
    DATA_NAME="generated CIFAR-10-format data (no CIFAR-10 at $cifar, no Fashion-MNIST at $fashion)"
  fi
  echo "dataset: $DATA_NAME"
}
