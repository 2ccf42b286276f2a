#!/usr/bin/env bash
# sender-indexer against ethereum-etl (the reference), same anvil chain, same
# PostgreSQL server, one run: prints both times and the ratio. Needs what
# scripts/test.sh installs (PostgreSQL binaries, the pinned anvil) and Python
# 3 with venv. ethereum-etl is installed, pinned, into target/etl-venv (it is
# a benchmark reference, not a dependency): ethereum-etl 2.4.2 with the
# SQLAlchemy 1.4 / pg8000 its PostgreSQL output uses, and parsimonious 0.10
# (its pinned 0.8 does not import on Python 3.11).
#   BENCH_BLOCKS=200 BENCH_TXS_PER_BLOCK=50 scripts/bench-vs-ethereum-etl.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/etl-venv
if [ ! -x "$venv/bin/ethereumetl" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "setuptools<70" wheel
  "$venv/bin/pip" install -q --no-build-isolation "ethereum-etl==2.4.2" "sqlalchemy<2" pg8000 timeout-decorator
  "$venv/bin/pip" install -q --no-deps "parsimonious==0.10.0" regex
fi
cargo build --release --locked --bin sender-indexer
pg_bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
work=$(mktemp -d /tmp/etl-bench.XXXXXX)
python3 scripts/bench_vs_ethereum_etl.py "$PWD/.tools/node_modules/.bin/anvil" \
  "$PWD/target/release/sender-indexer" "$PWD/$venv/bin/ethereumetl" "$pg_bin" "$work"
