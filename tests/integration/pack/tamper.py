"""Damages a packed file in place for test_pack_errors.sh.
usage: tamper.py FILE flip DATASET INDEX | version N"""
import sys

import h5py

f = h5py.File(sys.argv[1], "r+")
if sys.argv[2] == "flip":
    d, i = f[sys.argv[3]], int(sys.argv[4])
    d[i] = d[i] ^ 0xFF
else:
    f.attrs["format_version"] = int(sys.argv[3])
