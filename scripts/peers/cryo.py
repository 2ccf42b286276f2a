"""Peer: cryo (Paradigm's blockchain data extractor), PyPI `cryo` 0.3.2.

The PyPI wheel is cryo's Rust engine (crates cryo_cli + cryo_freeze, compiled in) behind
Python bindings; it ships no console script, so the run is `python -c "cryo.freeze(...)"`,
the package's documented Python entry point. `cryo.freeze(datatypes, **kwargs)` takes the
same arguments as the `cryo` CLI (crates/cli/src/args.rs, mirrored in cryo/_spec.py and in
the signature of `_cryo_rust._freeze`) and writes one parquet file per dataset and chunk:
`<output_dir>/ethereum__<dataset>__<first>_to_<last>.parquet` (chain id 1 is named
"ethereum").

What the run asks of the server (cryo_freeze 0.3.2, crates/freeze/src/types/sources.rs):
- eth_chainId once;
- blocks + transactions are collected together (MultiDatatype::BlocksAndTransactions):
  one eth_getBlockByNumber(n, true) per block, then the receipts for `gas_used` and
  `success` (default columns): eth_getBlockReceipts(<block NUMBER>), and when that fails,
  one eth_getTransactionReceipt per transaction;
- logs: one eth_getLogs {fromBlock, toBlock} per `inner_request_size` blocks (default 1).

Settings: cryo's own defaults, which its README says are meant for a node of one's own
(they "will slam a node too hard for use with 3rd party RPC providers"), as our local
server is: no requests-per-second limit, 100 concurrent requests
(`max_concurrent_requests`), 4 chunks at a time, 1000 blocks per chunk/file, 1 block per
eth_getLogs. None is tuned for this chain.

Block ranges: cryo's `a:b` is END-EXCLUSIVE (parse_block_range in
crates/cli/src/parse/blocks.rs subtracts one from an explicit end), so blocks
first..=last are asked for as `first:last+1`.

`freeze` does not raise when chunks fail: it returns {"n_completed", "n_skipped",
"n_errored"}. The command checks that no chunk errored and exits 1 otherwise, so a
failed extraction is not timed as a success.
"""

import glob
import os
import subprocess
import sys

NAME = "cryo 0.3.2"
WRITES = "parquet files"
ROWS = "blocks, transactions, logs"

# Pinned: cryo's wheel has no Python dependencies; pyarrow (also dependency-free in 18.x)
# is only for rows() to read the parquet back.
PACKAGES = ["cryo==0.3.2", "pyarrow==18.1.0"]

DATASETS = ["blocks", "transactions", "logs"]

# The run: freeze, then fail loudly if any chunk errored (freeze itself only counts them).
RUN = """\
import sys, cryo
first, end, rpc, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
result = cryo.freeze(
    {datasets!r},
    blocks=[f"{{first}}:{{end}}"],
    rpc=rpc,
    output_dir=out,
)
print("cryo.freeze:", result, flush=True)
if not result or result.get("n_errored", 0) != 0 or result.get("n_completed", 0) == 0:
    sys.exit(1)
""".format(datasets=DATASETS)


def _python(root):
    return os.path.join(root, "venv", "bin", "python")


def install(root: str) -> None:
    os.makedirs(root, exist_ok=True)
    py = _python(root)
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", os.path.join(root, "venv")], check=True)
    have = subprocess.run(
        [py, "-m", "pip", "freeze"], check=True, capture_output=True, text=True
    ).stdout.split()
    if all(p in have for p in PACKAGES):
        return
    subprocess.run(
        [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PACKAGES],
        check=True,
    )


def _out(ctx):
    return os.path.join(ctx.work, "cryo")


def command(ctx):
    out = _out(ctx)
    os.makedirs(out, exist_ok=True)
    argv = [
        _python(ctx.root), "-c", RUN,
        str(ctx.first), str(ctx.last + 1),  # end-exclusive, see the module doc
        ctx.rpc_url, out,
    ]
    # MESC, when configured on a machine, would override `rpc`; keep it out.
    env = {"MESC_MODE": "DISABLED"}
    return argv, env, ctx.work


def _hex(b) -> str:
    return "0x" + bytes(b).hex()


def _read(out, dataset, columns):
    """Rows of every parquet file cryo wrote for `dataset`, as tuples of `columns`."""
    import pyarrow.parquet as pq

    for path in sorted(glob.glob(os.path.join(out, f"*__{dataset}__*.parquet"))):
        table = pq.read_table(path, columns=columns)
        yield from zip(*(table.column(c).to_pylist() for c in columns))


def _read_rows(out) -> dict:
    """Runs in the venv's Python (the one with pyarrow); the binary columns are bytes."""
    txs = [
        (int(block), int(index), _hex(tx_hash), _hex(sender))
        for block, index, tx_hash, sender in _read(
            out, "transactions",
            ["block_number", "transaction_index", "transaction_hash", "from_address"],
        )
    ]
    logs = [
        (int(block), int(log_index), int(tx_index), _hex(address))
        for block, log_index, tx_index, address in _read(
            out, "logs", ["block_number", "log_index", "transaction_index", "address"]
        )
    ]
    return {"txs": txs, "logs": logs}


# rows() runs in the driver's Python, which has no pyarrow: it loads this file in the
# venv's Python (under another name, as `cryo` there is the package) and reads JSON back.
READ = """\
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("cryo_peer", sys.argv[1])
peer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peer)
sys.stdout.write(json.dumps(peer._read_rows(sys.argv[2])))  # dumps: C encoder, dump is not
"""


def rows(ctx) -> dict:
    import json

    out = subprocess.run(
        [_python(ctx.root), "-c", READ, os.path.abspath(__file__), _out(ctx)],
        check=True, capture_output=True, text=True,
    ).stdout
    got = json.loads(out)
    return {k: {tuple(row) for row in v} for k, v in got.items()}
