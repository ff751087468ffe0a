"""The command lines of the documentation, for test_doc_commands.sh (docs/testing.md says the rules).

usage: doc_commands.py SOURCE_DIR > PLAN

Reads every fenced block of README.md, ARCHITECTURE.md and docs/*.md (and checks that their
relative links name files of the tree and headings that exist). A block must name its language; the command
lines of `sh`/`bash`/`shell` blocks, and the `$ ` lines of `console` blocks, are the commands. A
marker before a block (only blank lines or other markers between them)

    <!-- tested by:
      test_slurm_2nodes "slurm/train_2nodes.sh"
      .ci/run "scripts/run_tests.sh"
    -->

hands each line of the block that contains every quoted fragment of an entry to that test, which
must exist (tests/integration/NAME.sh, or a path from the repository root) and contain those
fragments too; an entry that covers no line is an error (a stale marker). `<!-- doc-test: in
sequence -->` makes the block's remaining lines one unit, run in order in one scratch directory;
otherwise each line is a unit of its own.

Prints each unit to run as a line `UNIT<tab>FILE:LINE<tab>CIFAR_RUN` (1 when the fixture run
runs/cifar is to be there) followed by a line `CMD<tab>COMMAND` per command, and on stderr each
command handed to a test. Exits 1 naming every error.
"""
import glob
import os
import re
import sys

SRC = sys.argv[1]
COMMAND_LANGS = {"sh", "bash", "shell"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)\s*$")
errors = []


def strip_comment(line):
    """The command without a trailing `# comment` (a # after a space, outside quotes)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def parse_tested_by(body, where):
    """Entries (test, [fragments]) of a `tested by:` marker's body."""
    entries = []
    for raw in body.splitlines():
        raw = raw.strip()
        if not raw:
            continue
        m = re.match(r'^(\S+)((?:\s+"[^"]+")+)\s*$', raw)
        if not m:
            errors.append(f'{where}: a tested-by entry must read NAME "fragment" ...: {raw!r}')
            continue
        entries.append((m.group(1), re.findall(r'"([^"]+)"', m.group(2))))
    return entries


def test_text(name, where):
    path = os.path.join(SRC, name) if "/" in name else os.path.join(
        SRC, "tests", "integration", name + ".sh")
    try:
        with open(path, encoding="utf-8") as f:
            return path, f.read()
    except OSError as e:
        errors.append(f"{where}: the test named, {name} ({path}), cannot be read: {e.strerror}")
        return path, None


def command_lines(lang, lines, first_line):
    """(line number, command) of a block; `\\` at a line's end continues it."""
    out, pending, start = [], "", None
    for n, text in enumerate(lines, first_line):
        if lang == "console":
            if pending:
                text = text.strip()
            elif text.startswith("$ "):
                text = text[2:]
            else:
                continue
        elif not pending and (not text.strip() or text.lstrip().startswith("#")):
            continue
        if start is None:
            start = n
        if text.rstrip().endswith("\\"):
            pending += text.rstrip()[:-1] + " "
            continue
        out.append((start, (pending + text).strip()))
        pending, start = "", None
    return out


def units_of(path):
    rel = os.path.relpath(path, SRC)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    units = []
    markers = []  # (kind, payload, where) seen since the last content line
    i = 0
    while i < len(lines):
        line = lines[i]
        where = f"{rel}:{i + 1}"
        stripped = line.strip()
        if stripped.startswith("<!--"):
            body = stripped
            j = i
            while "-->" not in body and j + 1 < len(lines):
                j += 1
                body += "\n" + lines[j]
            inner = body[4:body.index("-->")] if "-->" in body else body[4:]
            inner = inner.strip()
            if inner.startswith("tested by:"):
                markers.append(("tested", parse_tested_by(inner[len("tested by:"):], where), where))
            elif inner.startswith("doc-test:"):
                word = inner[len("doc-test:"):].strip()
                if word != "in sequence":
                    errors.append(f"{where}: unknown marker 'doc-test: {word}' (known: in sequence)")
                markers.append(("sequence", None, where))
            i = j + 1
            continue
        m = FENCE.match(line)
        if not m:
            if stripped:
                markers = []
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        body = []
        j = i + 1
        while j < len(lines):
            close = re.match(r"^\s*(`{3,}|~{3,})\s*$", lines[j])
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
                break
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            errors.append(f"{where}: a fenced block that never closes")
        if not lang:
            errors.append(f"{where}: a fenced block without a language: mark it sh (commands), "
                          "console ($ commands and output), or text, toml, python, ...")
        tested = [e for kind, entries, _ in markers if kind == "tested" for e in entries]
        sequence = any(kind == "sequence" for kind, _, _ in markers)
        if lang in COMMAND_LANGS or lang == "console":
            used = set()
            run = []
            for n, cmd in command_lines(lang, body, i + 2):
                bare = strip_comment(cmd)
                if "\t" in cmd:
                    errors.append(f"{rel}:{n}: a tab in a command (write spaces)")
                for k, (name, frags) in enumerate(tested):
                    if all(fr in bare for fr in frags):
                        used.add(k)
                        tpath, text = test_text(name, f"{rel}:{n}")
                        if text is not None:
                            missing = [fr for fr in frags if fr not in text]
                            if missing:
                                errors.append(f"{rel}:{n}: '{bare}' is said to be tested by {name}, "
                                              f"but {tpath} does not contain {missing}")
                        print(f"  {rel}:{n}: tested by {name} {frags}: {bare}", file=sys.stderr)
                        break
                else:
                    run.append((n, cmd))
            for k, (name, frags) in enumerate(tested):
                if k not in used:
                    errors.append(f"{where}: marker entry {name} {frags} matches no command of "
                                  "the block")
            groups = [run] if sequence and run else [[r] for r in run]
            for g in groups:
                text = "\n".join(c for _, c in g)
                units.append({
                    "where": f"{rel}:{g[0][0]}",
                    "sequence": sequence,
                    "lines": [c for _, c in g],
                    # The fixture run runs/cifar is there for commands that use its files and do
                    # not train configs/cifar.toml (into runs/cifar) themselves.
                    "cifar_run": "runs/cifar/" in text and "configs/cifar.toml" not in text,
                })
        elif markers and any(kind == "tested" for kind, _, _ in markers):
            errors.append(f"{where}: a tested-by marker before a {lang or 'plain'} block, which "
                          "holds no commands")
        markers = []
        i = j + 1
    return units


files = [os.path.join(SRC, "README.md"), os.path.join(SRC, "ARCHITECTURE.md")] + sorted(
    glob.glob(os.path.join(SRC, "docs", "*.md")))


def anchors(path):
    """GitHub's anchors of a Markdown file's headings (outside fenced blocks)."""
    out, fence = set(), None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = FENCE.match(line)
            if m:
                fence = None if fence else m.group(2)[0]
                continue
            if not fence and line.startswith("#"):
                title = line.lstrip("#").strip().lower()
                out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def check_links(path):
    """Every relative link of a page names a file of the tree, and a heading of it after '#'."""
    rel = os.path.relpath(path, SRC)
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"(?ms)^\s*(```|~~~).*?^\s*\1\s*$", "", f.read())
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            errors.append(f"{rel}: the link ({target}) names no file of the tree")
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            errors.append(f"{rel}: the link ({target}) names no heading of {os.path.relpath(dest, SRC)}")


for f in files:
    check_links(f)
# A command shown on several pages runs once (the first place is named, with the others).
units, seen = [], {}
for f in files:
    for u in units_of(f):
        key = (tuple(strip_comment(c) for c in u["lines"]), u["sequence"], u["cifar_run"])
        if key in seen:
            seen[key]["where"] += "," + u["where"]
        else:
            seen[key] = u
            units.append(u)
for u in units:
    print(f"UNIT\t{u['where']}\t{int(u['cifar_run'])}")
    for c in u["lines"]:
        print(f"CMD\t{c}")
if errors:
    print("\n".join("ERROR: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
