#!/usr/bin/env bash
# The one test command (README, CI): installs whatever is missing
# (scripts/install.sh: PostgreSQL server binaries, node/npm, the pinned anvil
# and cast), then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/install.sh

# --- tests -----------------------------------------------------------------
# Not --all-targets: that would run the harness-less benchmarks too.
cargo test --locked
