#!/usr/bin/env bash
# sender-indexer beside other indexers (cryo, Subsquid, Ponder, ethereum-etl)
# on the same chain, served from memory by the backfill benchmark's JSON-RPC
# server: wall time and CPU per transaction of each tool, of PostgreSQL and
# of the server, each tool's rows checked against sender-indexer's. Needs
# what scripts/test.sh installs (PostgreSQL binaries), Python 3 with venv,
# Node.js with npm; each peer is installed, pinned, under target/peers/
# (benchmark references, not dependencies). See scripts/bench_peers.py.
#   BENCH_TXS=100000 BENCH_ROUNDS=3 scripts/bench-peers.sh
#   BENCH_PEERS=sender_indexer,cryo scripts/bench-peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin sender-indexer
server=$(cargo bench --locked --bench backfill --no-run --message-format json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "backfill" and m.get("executable"):
        print(m["executable"])')
pg_bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
work=$(mktemp -d /tmp/peers-bench.XXXXXX)
python3 scripts/bench_peers.py "$PWD" "$server" "$pg_bin" "$work"
