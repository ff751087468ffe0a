#!/usr/bin/env python3
"""Deterministic file mutator for the fuzz tests: fuzz_mutate.py SEED KIND IN OUT.

The same (SEED, KIND, IN) always gives the same OUT, so a failing case reproduces from the seed the
test prints. Prints one line describing the mutation. `fuzz_mutate.py -` reads tab-separated
"SEED KIND IN OUT" lines from stdin and does each (one description per line): a test mutates all its
files in one Python start, which costs more than a mutation. Kinds:
  flip          1-4 bit flips, half of them in HDF5 metadata, a quarter in the first/last 8 KiB
  setbytes      1-4 bytes set to 0x00, 0xff or a random value
  truncate      cut at a random length (often inside the first 8 KiB)
  extend        1-4096 random bytes appended
  noheader      the first 512 bytes zeroed (a snapshot's header removed)
  noheader_flip the header removed, then 1-2 bit flips, mostly in HDF5's first metadata
  magic         1-3 bits flipped in distinct bytes of the first 19 (a snapshot's first line)
  header        1-3 bytes of the first 512 changed (header text and padding)
  head16        1-2 of the first 16 bytes changed (IDX magic and sizes, gzip header)
  cifar_label   1-2 CIFAR-10 records get a label byte of 10..255
  text          TOML/text: a line dropped, duplicated or cut, a character replaced or inserted
"""
import random
import sys


# Signatures of HDF5 metadata blocks (superblock, object headers, B-trees, heaps): corrupt metadata
# is what can crash a parser, and flips in tensor data (most of a snapshot) only change values.
HDF5_SIGNATURES = [b"\x89HDF\r\n\x1a\n", b"OHDR", b"OCHK", b"BTHD", b"BTLF", b"BTIN", b"FRHP",
                   b"FHDB", b"FHIB", b"FSHD", b"FSSE", b"TREE", b"HEAP", b"SNOD", b"GCOL"]


def metadata_offsets(data):
    out = []
    for sig in HDF5_SIGNATURES:
        at = data.find(sig)
        while at >= 0:
            out.append(at)
            at = data.find(sig, at + 1)
    return sorted(out)


def positions(rng, data, lo, n):
    """n offsets in [lo, len(data)): half in HDF5 metadata, a quarter near the start or the end."""
    size = len(data)
    meta = [m for m in metadata_offsets(data) if m >= lo]
    out = []
    for _ in range(n):
        if size <= lo:
            break
        r = rng.random()
        if r < 0.5 and meta:
            out.append(min(size - 1, rng.choice(meta) + rng.randrange(256)))
        elif r < 0.75:
            out.append(rng.choice([rng.randrange(lo, min(size, lo + 8192)),
                                   rng.randrange(max(lo, size - 8192), size)]))
        else:
            out.append(rng.randrange(lo, size))
    return out


def flip(rng, data, lo=0, n=None):
    n = n or rng.randint(1, 4)
    done = []
    for at in positions(rng, data, lo, n):
        bit = 1 << rng.randrange(8)
        data[at] ^= bit
        done.append(f"{at}^{bit:#04x}")
    return "flip " + ",".join(done)


def text(rng, data):
    lines = bytes(data).split(b"\n")
    what = rng.choice(["drop", "dup", "cut", "char", "insert"])
    i = rng.randrange(len(lines))
    if what == "drop":
        del lines[i]
    elif what == "dup":
        lines.insert(i, lines[i])
    elif what == "cut":
        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    else:
        line = bytearray(lines[i])
        at = rng.randrange(len(line) + 1)
        ch = rng.choice(b'="[]#.,{}\\ \t0123456789-+eaz\x00\xff')
        if what == "char" and at < len(line):
            line[at] = ch
        else:
            line.insert(at, ch)
        lines[i] = bytes(line)
    data[:] = b"\n".join(lines)
    return f"text {what} line {i + 1}"


def mutate(seed, kind, src, dst):
    rng = random.Random(f"{seed}:{kind}")
    data = bytearray(open(src, "rb").read())
    if kind == "flip":
        desc = flip(rng, data)
    elif kind == "setbytes":
        done = []
        for at in positions(rng, data, 0, rng.randint(1, 4)):
            data[at] = rng.choice([0, 0xFF, rng.randrange(256)])
            done.append(f"{at}={data[at]:#04x}")
        desc = "setbytes " + ",".join(done)
    elif kind == "truncate":
        cut = rng.randrange(min(len(data), 8192)) if rng.random() < 0.5 else rng.randrange(len(data))
        del data[cut:]
        desc = f"truncate at {cut}"
    elif kind == "extend":
        extra = rng.randint(1, 4096)
        data += bytes(rng.randrange(256) for _ in range(extra))
        desc = f"extend by {extra}"
    elif kind == "noheader":
        data[:512] = bytes(512)
        desc = "noheader"
    elif kind == "noheader_flip":
        # HDF5 then parses unverified metadata: most of it (superblock, root group, the first
        # object headers) lies in the 2 KiB after the header, where most flips go.
        data[:512] = bytes(512)
        done = []
        for _ in range(rng.randint(1, 2)):
            if rng.random() < 0.7:
                at = rng.randrange(512, min(len(data), 2560))
            else:
                at = positions(rng, data, 512, 1)[0]
            bit = 1 << rng.randrange(8)
            data[at] ^= bit
            done.append(f"{at}^{bit:#04x}")
        desc = "noheader, flip " + ",".join(done)
    elif kind == "magic":
        done = []
        for at in rng.sample(range(19), rng.randint(1, 3)):  # distinct bytes: always a change
            bit = 1 << rng.randrange(8)
            data[at] ^= bit
            done.append(f"{at}^{bit:#04x}")
        desc = "magic " + ",".join(done)
    elif kind == "header":
        done = []
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(512)
            data[at] = rng.randrange(256)
            done.append(f"{at}={data[at]:#04x}")
        desc = "header " + ",".join(done)
    elif kind == "head16":
        done = []
        for at in rng.sample(range(min(16, len(data))), rng.randint(1, 2)):
            data[at] = rng.choice([0, 0xFF, data[at] ^ (1 << rng.randrange(8)), rng.randrange(256)])
            done.append(f"{at}={data[at]:#04x}")
        desc = "head16 " + ",".join(done)
    elif kind == "cifar_label":
        done = []
        for _ in range(rng.randint(1, 2)):
            at = 3073 * rng.randrange(max(1, len(data) // 3073))
            data[at] = rng.randrange(10, 256)
            done.append(f"{at}={data[at]}")
        desc = "cifar_label " + ",".join(done)
    elif kind == "text":
        desc = text(rng, data)
    else:
        sys.exit(f"fuzz_mutate.py: unknown kind {kind!r}")
    open(dst, "wb").write(bytes(data))
    return desc


def main():
    if sys.argv[1:] == ["-"]:
        for line in sys.stdin:
            print(mutate(*line.rstrip("\n").split("\t")))
    else:
        print(mutate(*sys.argv[1:5]))


if __name__ == "__main__":
    main()
