#!/usr/bin/env bash
# A long fuzzing run of the block reader, the transaction decoder and the
# signing-payload builder (tests/it/fuzz.rs), on the stable toolchain:
#   scripts/fuzz.sh [CASES_PER_TARGET]   (default 200000)
# The test suite runs the same targets with 300 cases each. A failure is
# shrunk to a minimal input and saved under tests/it/proptest-regressions/;
# commit that file so every later run tries it first.
set -euo pipefail
cd "$(dirname "$0")/.."
cases="${1:-200000}"
start=$(date +%s)
FUZZ_CASES="$cases" cargo test --locked --test it -- fuzz:: --test-threads 3
echo "fuzz.sh: ${cases} cases per target, 3 targets, $(( $(date +%s) - start )) s, 0 failures"
