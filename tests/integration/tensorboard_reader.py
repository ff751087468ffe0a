"""An independent reader of TensorBoard event files (python3-protobuf, python3-crcmod): nothing of
ddp_train's code. It checks every record's framing (length, masked CRC-32C of the length, data,
masked CRC-32C of the data), decodes the events with messages declared here from the field
numbers of TensorBoard's tensorboard/compat/proto/event.proto and summary.proto, and compares the
scalars with metrics.jsonl.

usage: tensorboard_reader.py RUN_DIR LOG_EVERY SEGMENTS
"""
import glob, json, os, struct, sys

import crcmod.predefined
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

crc32c = crcmod.predefined.mkPredefinedCrcFun("crc-32c")


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def messages():
    F = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="reader_event.proto", package="reader", syntax="proto3")

    def field(msg, name, number, type_, label=F.LABEL_OPTIONAL, type_name=None, oneof=None):
        x = msg.field.add(name=name, number=number, type=type_, label=label)
        if type_name: x.type_name = type_name
        if oneof is not None: x.oneof_index = oneof

    value = descriptor_pb2.DescriptorProto(name="Value")
    value.oneof_decl.add(name="value")
    field(value, "tag", 1, F.TYPE_STRING)
    field(value, "simple_value", 2, F.TYPE_FLOAT, oneof=0)
    summary = f.message_type.add(name="Summary")
    summary.nested_type.append(value)
    field(summary, "value", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".reader.Summary.Value")
    session = f.message_type.add(name="SessionLog")
    field(session, "status", 1, F.TYPE_INT32)  # enum SessionStatus: START = 1
    field(session, "checkpoint_path", 2, F.TYPE_STRING)
    event = f.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    field(event, "wall_time", 1, F.TYPE_DOUBLE)
    field(event, "step", 2, F.TYPE_INT64)
    field(event, "file_version", 3, F.TYPE_STRING, oneof=0)
    field(event, "summary", 5, F.TYPE_MESSAGE, type_name=".reader.Summary", oneof=0)
    field(event, "session_log", 7, F.TYPE_MESSAGE, type_name=".reader.SessionLog", oneof=0)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("reader.Event"))


Event = messages()


def records(path):
    data = open(path, "rb").read()
    pos, out = 0, []
    while pos < len(data):
        if len(data) - pos < 12: sys.exit(f"{path}: truncated record header at byte {pos}")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if hcrc != masked(header): sys.exit(f"{path}: bad length CRC at byte {pos}")
        body = data[pos + 12:pos + 12 + length]
        if len(body) != length or len(data) < pos + 16 + length:
            sys.exit(f"{path}: truncated record at byte {pos}")
        (dcrc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if dcrc != masked(body): sys.exit(f"{path}: bad data CRC at byte {pos}")
        e = Event()
        e.ParseFromString(body)
        out.append(e)
        pos += 16 + length
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


run, log_every, segments = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = sorted(glob.glob(os.path.join(run, "tensorboard", "events.out.tfevents.*")))
if len(files) != segments: sys.exit(f"{len(files)} events file(s), expected {segments}: {files}")
seen = {}  # (tag, step) -> value, over all files: a repeated step is a failure
nrec = 0
for path in files:
    evs = records(path)
    nrec += len(evs)
    if not evs or evs[0].WhichOneof("what") != "file_version" or evs[0].file_version != "brain.Event:2":
        sys.exit(f"{path}: the first record is not file_version brain.Event:2")
    for e in evs[1:]:
        kind = e.WhichOneof("what")
        if kind == "session_log":
            if e.session_log.status != 1: sys.exit(f"{path}: session log status {e.session_log.status}")
            continue
        if kind != "summary": sys.exit(f"{path}: unexpected event {e}")
        for v in e.summary.value:
            key = (v.tag, e.step)
            if key in seen: sys.exit(f"{path}: {v.tag} at step {e.step} written twice")
            seen[key] = v.simple_value

rows = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if l.strip()]
epochs = [r for r in rows if not r.get("summary")]
step, checked = 0, 0
for r in epochs:
    step += r["steps"]  # the global step that ended the epoch
    fields = ["epoch", "steps", "train_loss", "train_acc", "lr", "images_per_s", "epoch_s",
              "eval_s", "comm_wait_s"] + (["test_loss", "test_acc"] if "test_acc" in r else [])
    for k in fields:
        got = seen.get(("epoch/" + k, step))
        if got is None or got != f32(r[k]):
            sys.exit(f"epoch {r['epoch']}: epoch/{k} at step {step} is {got}, metrics.jsonl has {r[k]}")
        checked += 1
    for c in r.get("per_class", []):
        tag = "class_acc/" + c["class"]
        if seen.get((tag, step)) != f32(c["accuracy"]):
            sys.exit(f"epoch {r['epoch']}: {tag} is {seen.get((tag, step))}, metrics.jsonl has {c['accuracy']}")
        checked += 1
    if "test_acc" in r and not r.get("per_class"):
        sys.exit(f"epoch {r['epoch']}: evaluated, but metrics.jsonl has no per_class")
    for rank in r["ranks"]:
        tag = f"rank_images_per_s/rank_{rank['rank']}"
        if seen.get((tag, step)) != f32(rank["images_per_s"]):
            sys.exit(f"epoch {r['epoch']}: {tag} is {seen.get((tag, step))}, metrics.jsonl has {rank['images_per_s']}")
        checked += 1
# Every epoch written is one of metrics.jsonl's.
if sum(1 for (t, s) in seen if t == "epoch/epoch") != len(epochs):
    sys.exit("the events files hold other epochs than metrics.jsonl")
# The step scalars: every run.log_every steps of the whole run, once.
for tag in ("step/train_loss", "step/lr", "step/images_per_s"):
    steps = sorted(s for (t, s) in seen if t == tag)
    want = list(range(log_every, step + 1, log_every))
    if steps != want: sys.exit(f"{tag} at steps {steps}, expected {want}")
    if tag != "step/lr" and not all(seen[(tag, s)] > 0 for s in steps):
        sys.exit(f"{tag} has non-positive values")
print(f"{len(files)} file(s), {nrec} records with valid CRCs, {checked} epoch scalars equal to "
      f"metrics.jsonl, step scalars at {len(want)} steps, none repeated")
