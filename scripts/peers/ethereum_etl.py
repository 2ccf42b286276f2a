"""ethereum-etl (blockchain-etl), a peer for scripts/bench_peers.py.

Its documented export path, with its defaults (batches of 100 JSON-RPC
calls, 5 workers): `export_blocks_and_transactions` to CSV, the
transaction hashes taken from that CSV (`extract_csv_column`), then
`export_receipts_and_logs`, which reads each receipt by its transaction's
hash (`eth_getTransactionReceipt`). Its `stream` into PostgreSQL is not
used: its tables are keyed by transaction hash, and the bench chain repeats
its ten template blocks, so a hash names ten blocks and `stream` would
merge them. For the same reason the server answers a repeated hash with the
lowest block's receipt, so ethereum-etl's log rows carry that block's
number: they are checked by count, and row by row within the first ten
blocks; its transactions are checked in full.

Pinned: ethereum-etl 2.4.2, and parsimonious 0.10 (its pinned 0.8 does
not import on Python 3.11).
"""

import csv
import os
import subprocess

NAME = "ethereum-etl 2.4.2"
WRITES = "CSV files"
ROWS = "blocks, transactions (node's from), logs"


def install(root):
    venv = os.path.join(root, "venv")
    if os.path.exists(os.path.join(venv, "bin", "ethereumetl")):
        return
    subprocess.run(["python3", "-m", "venv", venv], check=True)
    pip = os.path.join(venv, "bin", "pip")
    subprocess.run([pip, "install", "-q", "setuptools<70", "wheel"], check=True)
    subprocess.run([pip, "install", "-q", "--no-build-isolation", "ethereum-etl==2.4.2"], check=True)
    subprocess.run([pip, "install", "-q", "--no-deps", "parsimonious==0.10.0", "regex"], check=True)


def command(ctx):
    etl = os.path.join(ctx.root, "venv", "bin", "ethereumetl")
    out = lambda f: os.path.join(ctx.work, f)
    script = (
        f'"$1" export_blocks_and_transactions --start-block {ctx.first} --end-block {ctx.last} '
        f'--provider-uri {ctx.rpc_url} --blocks-output {out("blocks.csv")} '
        f'--transactions-output {out("transactions.csv")} && '
        f'"$1" extract_csv_column --input {out("transactions.csv")} --column hash '
        f'--output {out("hashes.txt")} && '
        f'"$1" export_receipts_and_logs --transaction-hashes {out("hashes.txt")} '
        f'--provider-uri {ctx.rpc_url} --receipts-output {out("receipts.csv")} '
        f'--logs-output {out("logs.csv")}'
    )
    return ["bash", "-c", script, "etl", etl], {}, ctx.work


def _csv(path, columns):
    with open(path, newline="") as f:
        return [tuple(row[c] for c in columns) for row in csv.DictReader(f)]


def rows(ctx):
    txs = {
        (int(b), int(i), h, f)
        for b, i, h, f in _csv(os.path.join(ctx.work, "transactions.csv"),
                               ["block_number", "transaction_index", "hash", "from_address"])
    }
    logs = [
        (int(b), int(li), int(ti), a)
        for b, li, ti, a in _csv(os.path.join(ctx.work, "logs.csv"),
                                 ["block_number", "log_index", "transaction_index", "address"])
    ]
    return {"txs": txs, "logs": logs, "logs_by_hash_lookup": True}
