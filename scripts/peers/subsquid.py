"""Peer: Subsquid (SQD) @subsquid/evm-processor, RPC-only ingestion, PostgreSQL through @subsquid/typeorm-store.

The squid is plain CommonJS (scripts/peers/subsquid/main.js, lib/, db/migrations/): no TypeScript, no
`sqd codegen`, no build step. Its one table per kind is created by a hand-written migration that
main.js applies before the processor starts (what `sqd migration:apply` does), so the timed run includes
that (a few ms on an empty database).

Versions: @subsquid/evm-processor 1.27.3 (newest), @subsquid/typeorm-store 1.5.1 (newest that installs:
1.9.2 depends on @subsquid/typeorm-config ^4.2.0, which the npm registry does not have), typeorm 0.3.31
(newest 0.3.x; typeorm-store needs ^0.3.17), pg 8.23.1. All pinned in package.json and package-lock.json.

Batching / concurrency are the processor's defaults (see the comment at the top of main.js): 10-block
splits, 5 splits fetched at once, at most 10 requests in flight, JSON-RPC batches of up to 100 calls, one
database transaction per 10-block split. Finality confirmation 0 (static chain): the processor exits by
itself once it has written block `last`, so there is no `done`.

RPC methods it calls: eth_blockNumber, eth_getBlockByNumber (full transactions, in batches), eth_getLogs
{fromBlock, toBlock}. (eth_getBlockReceipts / eth_getTransactionReceipt only if a receipt field were
selected, eth_getBlockByHash only for hot blocks: neither happens here.)
"""
import os
import shutil

import npm_app

NAME = "Subsquid evm-processor 1.27.3 (typeorm-store 1.5.1)"
WRITES = "PostgreSQL (typeorm-store)"
ROWS = "transactions, logs"

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "subsquid")


def _node() -> str:
    node = shutil.which("node")
    if not node:
        raise RuntimeError("node is not on PATH")
    return node


def install(root: str) -> None:
    npm_app.install(SRC, root)


def command(ctx):
    env = {
        "SQD_RPC_URL": ctx.rpc_url,
        "SQD_FROM": str(ctx.first),
        "SQD_TO": str(ctx.last),
        "DB_URL": ctx.pg_url,
        "NODE_ENV": "production",
    }
    return [_node(), "main.js"], env, ctx.root


def rows(ctx) -> dict:
    txs = {
        (int(b), int(i), h.lower(), s.lower())
        for b, i, h, s in ctx.select(ctx.pg_url, 'SELECT block_number, transaction_index, hash, sender FROM "transaction"')
    }
    logs = {
        (int(b), int(li), int(ti), a.lower())
        for b, li, ti, a in ctx.select(ctx.pg_url, 'SELECT block_number, log_index, transaction_index, address FROM "log"')
    }
    return {"txs": txs, "logs": logs}
