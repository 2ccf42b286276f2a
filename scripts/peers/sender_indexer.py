"""sender-indexer itself, as a peer for scripts/bench_peers.py: the release
binary's `backfill` with its defaults (receipts mode, full verification,
every sender recovered), into PostgreSQL. Built by scripts/bench-peers.sh."""

import os

NAME = "sender-indexer (this repository)"
WRITES = "PostgreSQL"
ROWS = "blocks, transactions (recovered sender), receipts, logs; every block verified"


def install(root):
    pass


def command(ctx):
    binary = os.path.join(ctx.repo, "target", "release", "sender-indexer")
    argv = [binary, "backfill", "--from", str(ctx.first), "--to", str(ctx.last)]
    return argv, {"RPC_URL": ctx.rpc_url, "DATABASE_URL": ctx.pg_url, "RUST_LOG": "warn"}, ctx.work


def rows(ctx):
    txs = {
        (int(b), int(i), h, s)
        for b, i, h, s in ctx.select(
            ctx.pg_url,
            "SELECT block_number, tx_index, '0x' || encode(hash, 'hex'), '0x' || encode(sender, 'hex')"
            " FROM transactions")
    }
    logs = {
        (int(b), int(li), int(ti), a)
        for b, li, ti, a in ctx.select(
            ctx.pg_url,
            "SELECT block_number, log_index, tx_index, '0x' || encode(address, 'hex') FROM logs")
    }
    return {"txs": txs, "logs": logs}
