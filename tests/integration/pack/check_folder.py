"""Checks a packed image folder against torchvision's ImageFolder and PIL (test_pack_imagefolder.sh).
usage: check_folder.py FOLDER PACKED.h5 raw|encoded [HxW]
raw: classes, labels and sample order equal ImageFolder's; every image equals
PIL.Image.open(path).convert("RGB") (resized with Image.BILINEAR when HxW is given) bit for bit.
encoded: the same order, and each sample's bytes are the file's bytes."""
import sys

import h5py
import numpy as np
from PIL import Image
from torchvision.datasets import ImageFolder

folder, packed, encoding = sys.argv[1], sys.argv[2], sys.argv[3]
size = tuple(int(v) for v in sys.argv[4].split("x")) if len(sys.argv) > 4 else None
# torchvision accepts more extensions than we do; this folder has none of the others but .gif,
# which its default IMG_EXTENSIONS does not hold either.
tv = ImageFolder(folder)
f = h5py.File(packed, "r")
assert f.attrs["format"] in (b"ddp_train.packed", "ddp_train.packed"), f.attrs["format"]
classes = [c.decode() if isinstance(c, bytes) else c for c in f["classes"][()]]
assert classes == tv.classes, (classes, tv.classes)
labels = f["labels"][()]
assert list(labels) == [t for _, t in tv.samples], (list(labels), tv.samples)
assert f.attrs["samples"] == len(tv.samples)
worst = 0
for i, (path, _) in enumerate(tv.samples):
    if encoding == "encoded":
        b, e = f["offsets"][i], f["offsets"][i + 1]
        assert f["encoded"][b:e].tobytes() == open(path, "rb").read(), path
        continue
    img = Image.open(path).convert("RGB")
    if size:
        img = img.resize((size[1], size[0]), Image.BILINEAR)
    want = np.asarray(img).transpose(2, 0, 1)
    got = f["images"][i]
    if got.shape != want.shape or not np.array_equal(got, want):
        diff = np.abs(got.astype(int) - want.astype(int)).max() if got.shape == want.shape else -1
        print("sample %d (%s): pixels differ from PIL's (max |diff| %d)" % (i, path, diff))
        sys.exit(1)
print("%d samples in %d classes: order, labels and %s equal torchvision/PIL" %
      (len(tv.samples), len(classes), "bytes" if encoding == "encoded" else "pixels"))
