"""Exits 0 when two snapshots hold bitwise-equal model tensors (every dataset under /model).
usage: same_weights.py A.h5 B.h5"""
import sys

import h5py
import numpy as np

a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a["model"].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
assert names, "no tensors under /model"
for n in names:
    x, y = a["model"][n][()], b["model"][n][()]
    if x.shape != y.shape or x.tobytes() != y.tobytes():
        print("tensor %s differs (max abs diff %g)" % (n, np.max(np.abs(x - y))))
        sys.exit(1)
print("%d tensors bitwise equal" % len(names))
