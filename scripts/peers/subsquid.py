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
import hashlib
import os
import shutil
import subprocess

NAME = "Subsquid evm-processor 1.27.3 (typeorm-store 1.5.1)"
WRITES = "PostgreSQL (typeorm-store)"
ROWS = "transactions, logs"

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "subsquid")
# what install() copies into the root (package files + the squid's sources)
FILES = ["package.json", "package-lock.json", "main.js", "lib/entities.js", "lib/model/index.js",
         "db/migrations/1700000000000-Data.js"]
STAMP = ".installed-lock-sha256"


def _node() -> str:
    node = shutil.which("node")
    if not node:
        raise RuntimeError("node is not on PATH")
    return node


def install(root: str) -> None:
    os.makedirs(root, exist_ok=True)
    for rel in FILES:
        dst = os.path.join(root, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.join(SRC, rel), dst)
    with open(os.path.join(SRC, "package-lock.json"), "rb") as f:
        lock = hashlib.sha256(f.read()).hexdigest()
    stamp = os.path.join(root, STAMP)
    if (os.path.isdir(os.path.join(root, "node_modules", "@subsquid", "evm-processor"))
            and os.path.exists(stamp) and open(stamp).read().strip() == lock):
        return
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=root, check=True)
    with open(stamp, "w") as f:
        f.write(lock + "\n")


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
