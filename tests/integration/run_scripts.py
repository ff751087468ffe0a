"""Runs several Python scripts in one process, each as its own process would run it: as __main__,
with its own sys.argv, its output (and its subprocesses') in its own log, its exit status in
LOG.rc. An `import torch` or `import torchvision` costs seconds of CPU; a test whose checks are
scripts that import them pays it once this way.
usage: run_scripts.py LOG SCRIPT [ARG...] [-- LOG SCRIPT [ARG...]]...
Every script runs, whatever the others' outcome; this process exits 0 (the statuses are in the .rc
files). A script's uncaught exception is printed to its log, status 1; sys.exit("message") prints
the message to its log, status 1, as python would."""
import os
import runpy
import sys
import traceback


def run(log, script, argv):
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.argv, rc = [script] + argv, 0
    path = list(sys.path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python3 SCRIPT` has it
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
        rc = e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:  # noqa: B036 (a script's failure of any kind is its status, not ours)
        traceback.print_exc()
        rc = 1
    sys.path[:] = path
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    for f in (fd,) + saved:
        os.close(f)
    with open(log + ".rc", "w") as f:
        f.write("%d\n" % rc)


def main():
    jobs = [[]]
    for a in sys.argv[1:]:
        if a == "--":
            jobs.append([])
        else:
            jobs[-1].append(a)
    if any(len(j) < 2 for j in jobs):
        sys.exit(__doc__)
    for log, script, *argv in jobs:
        run(log, script, argv)


if __name__ == "__main__":
    main()
