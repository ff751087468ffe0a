#!/usr/bin/env bash
# ARCHITECTURE.md names only files and folders that exist (architecture_paths.py); a moved or
# renamed file whose page was not updated fails here.
source "$(dirname "$0")/lib.sh"
command -v git > /dev/null && git -C "$SRC" rev-parse --git-dir > /dev/null 2>&1 || skip "not a git checkout"
(cd "$SRC" && python3 tests/integration/architecture_paths.py) || fail "ARCHITECTURE.md names paths that do not exist (above)"
pass "every path ARCHITECTURE.md names exists"
