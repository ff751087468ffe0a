"""The fingerprint of a packed file as docs/dataset_format.md defines it ("Checksums"), computed
with h5py and zlib alone: test_doctor_packed.sh checks the doctor's figure against it.
  fingerprint.py FILE.h5  ->  8 hex digits"""
import struct
import sys
import zlib

import h5py


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


with h5py.File(sys.argv[1], "r") as f:
    a = f.attrs
    crc = zlib.crc32(f["chunk_crc32"][:].astype("<u4").tobytes())
    encoding = 0 if text(a["encoding"]).rstrip("\0") == "raw" else 1
    ints = [encoding] + [int(a[k]) if k in a else 0 for k in
                         ("channels", "height", "width", "samples", "samples_per_chunk", "chunk_bytes")]
    for v in ints:
        crc = zlib.crc32(struct.pack("<q", v), crc)
    for key in ("labels_crc32", "offsets_crc32"):
        crc = zlib.crc32(struct.pack("<I", int(a[key]) if key in a else 0), crc)
    for name in f["classes"][:]:
        b = name if isinstance(name, bytes) else name.encode()
        crc = zlib.crc32(struct.pack("<Q", len(b)) + b, crc)
    print("%08x" % crc)
