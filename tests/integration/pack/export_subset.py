"""Exports the first N samples of a split of CIFAR-10 (binary) or Fashion-MNIST (IDX, gzipped) to
PNG files and a CSV list `path,label` in the original order (test_pack_exact.sh).
usage: export_subset.py cifar10|fashion ROOT train|test N OUT_DIR"""
import gzip
import os
import sys

import numpy as np
from PIL import Image

kind, root, split, n, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
if kind == "cifar10":
    name = "data_batch_1.bin" if split == "train" else "test_batch.bin"
    rec = np.fromfile(os.path.join(root, name), dtype=np.uint8).reshape(-1, 3073)[:n]
    labels = rec[:, 0]
    images = rec[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # to HWC for PIL
else:
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(root, prefix + "-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), dtype=np.uint8)[16:].reshape(-1, 28, 28)[:n]
    with gzip.open(os.path.join(root, prefix + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), dtype=np.uint8)[8:][:n]
# Every class must appear, or the packed file (classes 0..max label) would size the model's
# output layer differently from the built-in dataset's 10 classes.
assert labels.max() == 9, "the subset lacks class 9"
os.makedirs(os.path.join(out, split), exist_ok=True)
with open(os.path.join(out, split + ".csv"), "w") as csv:
    csv.write("path,label\n")
    for i, (img, label) in enumerate(zip(images, labels)):
        rel = os.path.join(split, "%05d.png" % i)
        Image.fromarray(img).save(os.path.join(out, rel))
        csv.write("%s,%d\n" % (rel, label))
