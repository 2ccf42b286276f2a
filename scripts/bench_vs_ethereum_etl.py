"""sender-indexer against ethereum-etl, side by side in one run.

Both index the same anvil chain (blocks of transfers that log an ERC-20
style Transfer each, plus plain transfers) into the same PostgreSQL server,
one database each: sender-indexer with `backfill` (receipts mode, the
default: blocks, transactions with recovered senders, receipt fields, logs),
ethereum-etl with `stream -e block,transaction,log` into its own PostgreSQL
tables (created from its SQLAlchemy schema). Each is timed until its
database holds every block and every log of the chain; the ratio is
printed. Run by scripts/bench-vs-ethereum-etl.sh, which sets up the tools.
"""

import json
import os
import subprocess
import sys
import time
import urllib.request

import pgcluster
from pgcluster import as_postgres

ANVIL, INDEXER, ETL, PG_BIN, WORK = sys.argv[1:6]
BLOCKS = int(os.environ.get("BENCH_BLOCKS", "200"))
TXS_PER_BLOCK = int(os.environ.get("BENCH_TXS_PER_BLOCK", "50"))
PG_PORT = 55000 + os.getpid() % 1000
ANVIL_PORT = PG_PORT + 1
TRANSFER = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
# Runtime: LOG3 with topics calldata[0..96] and data the rest.
LOG3 = "366000600037604051602051600051606036036060a300"


def rpc(method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{ANVIL_PORT}", body, {"Content-Type": "application/json"}
    )
    answer = json.load(urllib.request.urlopen(req))
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer["result"]


def psql(db, sql):
    out = as_postgres(
        [f"{PG_BIN}/psql", "-h", "127.0.0.1", "-p", str(PG_PORT), "-U", "postgres", "-d", db,
         "-tAc", sql]
    )
    return out.stdout.strip()


def main():
    os.makedirs(WORK, exist_ok=True)
    pgdata = pgcluster.start(PG_BIN, WORK, PG_PORT)
    anvil = subprocess.Popen(
        [ANVIL, "--port", str(ANVIL_PORT), "--host", "127.0.0.1", "--no-mining", "--silent",
         "--gas-limit", "100000000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # npm's `anvil` is a wrapper that starts the real binary: stop the group.
        start_new_session=True,
    )
    try:
        for _ in range(100):
            try:
                rpc("eth_blockNumber", [])
                break
            except Exception:
                time.sleep(0.1)
        accounts = rpc("eth_accounts", [])
        length = len(LOG3) // 2
        initcode = f"0x60{length:02x}600c60003960{length:02x}6000f3{LOG3}"
        rpc("eth_sendTransaction", [{"from": accounts[0], "data": initcode}])
        rpc("evm_mine", [])
        token = rpc("eth_getTransactionReceipt", [rpc("eth_getBlockByNumber", ["0x1", False])["transactions"][0]])["contractAddress"]
        made = time.time()
        word = lambda h: h[2:].lower().rjust(64, "0")
        for b in range(BLOCKS):
            for i in range(TXS_PER_BLOCK):
                sender = accounts[1 + i % 9]
                if i % 5 == 4:
                    tx = {"from": sender, "to": accounts[0], "value": "0x1"}
                else:
                    data = "0x" + TRANSFER + word(sender) + word(accounts[i % 10]) + word(hex(b * 1000 + i))
                    tx = {"from": sender, "to": token, "data": data, "gas": "0x186a0"}
                rpc("eth_sendTransaction", [tx])
            rpc("evm_mine", [])
        head = int(rpc("eth_blockNumber", []), 16)
        txs = sum(len(rpc("eth_getBlockByNumber", [hex(n), False])["transactions"]) for n in range(head + 1))
        logs = len(rpc("eth_getLogs", [{"fromBlock": "0x0", "toBlock": hex(head)}]))
        print(f"chain: {head + 1} blocks, {txs} txs, {logs} logs (made in {time.time() - made:.1f}s)")
        url = lambda db: f"postgres://postgres@127.0.0.1:{PG_PORT}/{db}"

        psql("postgres", "CREATE DATABASE ours")
        env = dict(os.environ, RPC_URL=f"http://127.0.0.1:{ANVIL_PORT}", DATABASE_URL=url("ours"),
                   RUST_LOG="warn")
        start = time.time()
        subprocess.run([INDEXER, "backfill", "--from", "0", "--to", str(head)], env=env, check=True)
        ours = time.time() - start
        got = psql("ours", "SELECT (SELECT count(*) FROM blocks) || ' ' || (SELECT count(*) FROM transactions) || ' ' || (SELECT count(*) FROM logs)")
        assert got == f"{head + 1} {txs} {logs}", f"sender-indexer stored {got}"

        psql("postgres", "CREATE DATABASE etl")
        etl_url = f"postgresql+pg8000://postgres@127.0.0.1:{PG_PORT}/etl"
        subprocess.run([os.path.join(os.path.dirname(ETL), "python"), "-c",
                        "import sys, sqlalchemy; from ethereumetl.streaming.postgres_tables import metadata; "
                        "metadata.create_all(sqlalchemy.create_engine(sys.argv[1]))", etl_url], check=True)
        last = os.path.join(WORK, "last_synced_block.txt")
        if os.path.exists(last):
            os.remove(last)
        start = time.time()
        etl = subprocess.Popen(
            [ETL, "stream", "--start-block", "0", "-e", "block,transaction,log", "--provider-uri",
             f"http://127.0.0.1:{ANVIL_PORT}", "--output", etl_url, "--last-synced-block-file", last,
             "--period-seconds", "1", "-B", os.environ.get("ETL_BLOCK_BATCH", "10")],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(WORK, "etl.log"), "w"),
        )
        print(f"(ethereum-etl: -B {os.environ.get('ETL_BLOCK_BATCH', '10')} blocks per sync round, its default 5 workers)", flush=True)
        want = f"{head + 1} {txs} {logs}"
        deadline = start + float(os.environ.get("ETL_TIMEOUT", "1800"))
        while True:
            got = psql("etl", "SELECT (SELECT count(*) FROM blocks) || ' ' || (SELECT count(*) FROM transactions) || ' ' || (SELECT count(*) FROM logs)")
            if got == want:
                break
            if etl.poll() is not None or time.time() > deadline:
                etl.kill()
                raise SystemExit(f"ethereum-etl stopped or timed out with {got} of {want}; see {WORK}/etl.log")
            time.sleep(0.2)
        theirs = time.time() - start
        etl.kill()
        print(f"sender-indexer backfill: {ours:.2f} s ({txs / ours:,.0f} txs/s), senders recovered and logs stored")
        print(f"ethereum-etl stream -e block,transaction,log (-B {os.environ.get('ETL_BLOCK_BATCH', '10')}): {theirs:.2f} s ({txs / theirs:,.0f} txs/s)")
        print(f"ratio: sender-indexer is {theirs / ours:.1f}x faster (goal >= 10x)")
    finally:
        os.killpg(anvil.pid, 9)
        pgcluster.stop(PG_BIN, pgdata)


if __name__ == "__main__":
    main()
