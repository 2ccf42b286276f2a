"""Ponder (ponder.sh) as a peer of scripts/bench_peers.py.

Ponder 0.16.10 is the newest release that runs on Node.js 20 (0.17 needs Node >= 22). The app in
scripts/peers/ponder/ indexes the ERC-20 Transfer events of the chain's 50 contracts (the server's list) into a
PostgreSQL table `transfer` (one row per log, with the sender of its transaction). Ponder runs
the TypeScript itself (vite-node); nothing is compiled beforehand.

How it is run: `ponder start` (production mode; its docs' way to run an indexer) with Ponder's
defaults, nothing tuned: HTTP transport polling every 1 s, eth_getLogs block ranges sized by
Ponder, its RPC request cache on, multichain ordering, its own RPC concurrency. It does not
exit when it has caught up (it keeps serving HTTP), so `done` polls its /ready endpoint (200
once the backfill is indexed) and /status (the indexed block), see `done`. The process tree:
node (one process) and the esbuild service it starts to load the TypeScript.

Ponder backfills only the blocks it counts as finalized (65 below the head on chain 1) and
indexes newer ones block by block in its live mode; with endBlock set, 0.16.10 then stops short
when more than 50 of them are left (it fetches at most 50 missing blocks per head it sees). The
bench server therefore serves 65 empty blocks above ctx.last, so the whole range is a backfill.

RPC used: eth_chainId, eth_getBlockByNumber (by tag
"latest" and by number, with and without transactions; this includes block first-1, i.e.
block 0 (genesis) when first is 1, which Ponder takes for granted on any chain),
eth_getLogs (block ranges in backfill; by blockHash in live mode).

Every run starts from nothing: the driver gives a fresh database (Ponder's RPC cache lives in
its `ponder_sync` schema there), and the project root Ponder runs in is a fresh folder in
ctx.work (the app's sources copied, node_modules linked to the install root), so Ponder's
`.ponder/` folder (vite's cache), `generated/` and `ponder-env.d.ts` are written there and
never reused. Telemetry is off (PONDER_TELEMETRY_DISABLED): nothing leaves the machine.
"""

import json
import os
import shutil
import socket
import urllib.error
import urllib.request

import npm_app

NAME = "ponder 0.16.10"
WRITES = "PostgreSQL"
ROWS = "logs (Transfer events, with the tx sender)"

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ponder")
SCHEMA = "ponder_bench"  # `ponder start` requires a database schema for the app's tables
PORT_FILE = "ponder.port"


def install(root: str) -> None:
    """The app in `root`, `npm ci`-ed (pinned by package-lock.json)."""
    npm_app.install(HERE, root)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _app_dir(ctx) -> str:
    return os.path.join(ctx.work, "ponder-app")


def command(ctx):
    app = _app_dir(ctx)
    shutil.rmtree(app, ignore_errors=True)
    npm_app.copy_app(HERE, app)
    os.symlink(os.path.join(ctx.root, "node_modules"), os.path.join(app, "node_modules"))
    port = _free_port()
    with open(os.path.join(ctx.work, PORT_FILE), "w") as f:
        f.write(str(port))
    ctx.ponder_port = port
    argv = [
        shutil.which("node") or "node",
        os.path.join(ctx.root, "node_modules", "ponder", "dist", "esm", "bin", "ponder.js"),
        "start",
        "--root", app,
        "--schema", SCHEMA,
        "--port", str(port),
        "--hostname", "127.0.0.1",
    ]
    env = {
        "DATABASE_URL": ctx.pg_url,
        "DATABASE_SCHEMA": SCHEMA,
        "PONDER_TELEMETRY_DISABLED": "true",
        "PONDER_CHAIN_ID": str(ctx.chain_id),
        "PONDER_RPC_URL": ctx.rpc_url,
        "PONDER_START_BLOCK": str(ctx.first),
        "PONDER_END_BLOCK": str(ctx.last),
        "PONDER_CONTRACTS": ",".join(ctx.contracts),
        "NODE_ENV": "production",
    }
    return argv, env, app


def _get(ctx, path: str):
    port = getattr(ctx, "ponder_port", None)
    if port is None:
        with open(os.path.join(ctx.work, PORT_FILE)) as f:
            port = int(f.read())
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except (OSError, ValueError):
        return None, b""


FINISHED = b"Completed indexing across all chains"


def _logged_finished(ctx) -> bool:
    """Ponder's own word that it has nothing left to index (it logs this line once and then
    only serves HTTP), looked for at the end of the run's output files in ctx.work."""
    for entry in os.scandir(ctx.work):
        if not entry.is_file():
            continue
        try:
            with open(entry.path, "rb") as f:
                f.seek(max(0, entry.stat().st_size - 16384))
                if FINISHED in f.read():
                    return True
        except OSError:
            pass
    return False


def done(ctx) -> bool:
    status, _ = _get(ctx, "/ready")
    if status != 200:
        return False
    # /ready turns 200 when the backfill of the blocks Ponder counts as *finalized* is indexed:
    # those up to head - 65 on chain 1 (Ponder's finality rule for mainnet). When ctx.last is
    # newer than that, Ponder indexes the rest afterwards block by block in its live (polling)
    # mode and stops live indexing at endBlock. So also wait until /status says the indexed
    # block reached ctx.last ...
    status, body = _get(ctx, "/status")
    if status == 200:
        try:
            chains = json.loads(body)
            if chains and all(c["block"]["number"] >= ctx.last for c in chains.values()):
                return True
        except (ValueError, KeyError, TypeError):
            pass
    # ... or until Ponder says it has finished without getting there: 0.16.10 ends live
    # indexing when it sees the endBlock as the chain head even if that head is more than 50
    # blocks past the blocks it has indexed (it fetches at most 50 missing blocks per head it
    # sees), so it can stop short; rows() then shows what is missing instead of the driver
    # waiting forever.
    return _logged_finished(ctx)


def rows(ctx) -> dict:
    logs = set()
    senders = set()
    for block, log_index, tx_index, address, tx_from in ctx.select(
        ctx.pg_url,
        f"SELECT block_number, log_index, transaction_index, address, tx_from FROM {SCHEMA}.transfer",
    ):
        logs.add((int(block), int(log_index), int(tx_index), address.lower()))
        senders.add((int(block), int(log_index), tx_from.lower()))
    return {"txs": None, "logs": logs, "log_senders": senders}
