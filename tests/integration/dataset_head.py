"""Copies the first samples of a real dataset into OUT, in its own format (CIFAR-10 binary
batches; Fashion-MNIST idx files, uncompressed, with headers that count the samples kept).
ddp_train reads every record of the files it is given before it takes data.train_limit of them:
for about 0.6 to 0.8 CPU-seconds a rank start-up (CIFAR-10's 60,000 images, Fashion-MNIST's
decompression), which the tests that start dozens of small runs spare this way.
usage: dataset_head.py cifar10|fashion_mnist SOURCE_DIR OUT TRAIN TEST
  (cifar10: TRAIN samples from each of the 5 training batches)"""
import gzip
import os
import struct
import sys

kind, src, out, train, test = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
os.makedirs(out, exist_ok=True)
if kind == "cifar10":
    record = 1 + 3 * 32 * 32
    files = [("data_batch_%d.bin" % i, train) for i in range(1, 6)] + [("test_batch.bin", test)]
    for name, n in files:
        with open(os.path.join(src, name), "rb") as f:
            body = f.read(n * record)
        assert len(body) == n * record, "%s holds fewer than %d samples" % (name, n)
        with open(os.path.join(out, name), "wb") as g:
            g.write(body)
elif kind == "fashion_mnist":
    for split, n in (("train", train), ("t10k", test)):
        for what, dims in (("images-idx3", 3), ("labels-idx1", 1)):
            name = "%s-%s-ubyte" % (split, what)
            with gzip.open(os.path.join(src, name + ".gz"), "rb") as f:
                head = f.read(4 + 4 * dims)
                shape = struct.unpack(">%dI" % dims, head[4:])
                assert shape[0] >= n, "%s holds %d samples, %d asked for" % (name, shape[0], n)
                body = f.read(n * (shape[1] * shape[2] if dims == 3 else 1))
            with open(os.path.join(out, name), "wb") as g:
                g.write(head[:4] + struct.pack(">%dI" % dims, n, *shape[1:]) + body)
else:
    sys.exit("dataset_head.py: unknown dataset " + kind)
