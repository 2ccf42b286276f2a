"""Peers side by side: sender-indexer and other indexers on the same chain.

The backfill benchmark's in-memory JSON-RPC server (`BENCH_SERVE`, see
benches/backfill.rs) serves renumbered mainnet blocks with ERC-20 Transfer
logs; every tool in `scripts/peers/` indexes the same block range from it,
one after the other, round after round (so the machine's noise falls on
all of them), each into a fresh database of one PostgreSQL cluster or a
fresh directory. For each run: wall time until the tool has written every
row (it exits, or its `done` says so), CPU of the tool's whole process
tree, of PostgreSQL and of the server. Each tool's rows are then read back
and compared with sender-indexer's, which are compared with the chain
(counts the server reports). A tool whose rows differ fails the run.

Run by scripts/bench-peers.sh (which builds and installs); prints one
markdown table of medians. Knobs: BENCH_TXS (default 100000), BENCH_ROUNDS
(default 3), BENCH_PEERS (comma-separated module names, default all).
A peer module (scripts/peers/README.md) defines NAME, WRITES, ROWS,
install(root), command(ctx), optionally done(ctx), and rows(ctx).
"""

import importlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import types

from pgcluster import as_postgres
import pgcluster

REPO, SERVER, PG_BIN, WORK = sys.argv[1:5]
TXS = int(os.environ.get("BENCH_TXS", "100000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
ALL = ["sender_indexer", "cryo", "subsquid", "ponder", "ethereum_etl"]
PEERS = [p for p in os.environ.get("BENCH_PEERS", ",".join(ALL)).split(",") if p]
PG_PORT = 56000 + os.getpid() % 1000
TICK = os.sysconf("SC_CLK_TCK")
TIMEOUT = float(os.environ.get("BENCH_PEER_TIMEOUT", "1800"))


def psql(url, sql):
    """One value (or rows joined by newlines) of `sql` on database `url`."""
    return as_postgres([f"{PG_BIN}/psql", url, "-v", "ON_ERROR_STOP=1", "-tAc", sql]).stdout.strip()


def select(url, sql):
    """Rows of `sql` as tuples of strings (no value may hold a '|')."""
    out = as_postgres([f"{PG_BIN}/psql", url, "-v", "ON_ERROR_STOP=1", "-tA", "-F", "|", "-c", sql]).stdout
    return [tuple(line.split("|")) for line in out.splitlines() if line]


def stat_fields(pid):
    """Fields of /proc/PID/stat after the command: [state, ppid, pgrp, session, ...]."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(") ", 1)[1].split()


def cpu_of(pid):
    """CPU seconds of a process, with the children it has reaped."""
    f = stat_fields(pid)
    return sum(int(x) for x in f[11:15]) / TICK


def processes():
    """(pid, /proc/PID/stat fields) of every process still there."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                yield int(entry), stat_fields(entry)
            except (OSError, IndexError):
                pass


def session_cpu(sid):
    """CPU seconds of every process of session `sid` (each with its reaped children)."""
    return sum(sum(int(x) for x in f[11:15]) for _, f in processes() if int(f[3]) == sid) / TICK


def postgres_cpu(postmaster):
    """CPU seconds of the cluster: the postmaster with its reaped children, and its live children."""
    ticks = 0
    for pid, f in processes():
        if pid == postmaster:
            ticks += sum(int(x) for x in f[11:15])
        elif int(f[1]) == postmaster:
            ticks += sum(int(x) for x in f[11:13])
    return ticks / TICK


def run_once(module, name, chain, postmaster, server_pid, round_no):
    work = os.path.join(WORK, f"{name}-{round_no}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    db = f"{name}_{round_no}"
    psql(chain["pg"]("postgres"), f"DROP DATABASE IF EXISTS {db}")
    psql(chain["pg"]("postgres"), f"CREATE DATABASE {db}")
    ctx = types.SimpleNamespace(
        rpc_url=chain["url"], first=chain["first"], last=chain["last"], chain_id=chain["chain_id"],
        txs=chain["txs"], logs=chain["logs"], contracts=chain["contracts"], work=work,
        pg_url=chain["pg"](db),
        root=os.path.join(REPO, "target", "peers", name), repo=REPO, psql=psql, select=select,
    )
    argv, env, cwd = module.command(ctx)
    pg0, srv0 = postgres_cpu(postmaster), cpu_of(server_pid)
    start = time.monotonic()
    with open(os.path.join(work, "stdout"), "w") as out, open(os.path.join(work, "stderr"), "w") as err:
        child = subprocess.Popen(argv, env=dict(os.environ, **env), cwd=cwd, stdout=out, stderr=err,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
    done = getattr(module, "done", None)
    while True:
        if done is None:
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.monotonic() - start
            if status != 0:
                raise SystemExit(f"{name} exited with status {status}; see {work}/stderr")
            cpu = usage.ru_utime + usage.ru_stime + session_cpu(child.pid)
            break
        if child.poll() is not None:
            raise SystemExit(f"{name} stopped (status {child.returncode}) before done; see {work}/stderr")
        if done(ctx):
            wall = time.monotonic() - start
            cpu = session_cpu(child.pid)
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            break
        if time.monotonic() - start > TIMEOUT:
            os.killpg(child.pid, signal.SIGKILL)
            raise SystemExit(f"{name} not done after {TIMEOUT:.0f} s; see {work}/stderr")
        time.sleep(0.2)
    # Clock ticks of processes that come and go can make a tiny difference negative.
    pg, srv = max(0.0, postgres_cpu(postmaster) - pg0), cpu_of(server_pid) - srv0
    return ctx, {"wall": wall, "cpu": cpu, "pg": pg, "server": srv}


def check(name, got, ref, chain):
    """What of `got` matches the reference rows; raises when something differs."""
    said = []
    if got.get("txs") is not None:
        if got["txs"] != ref["txs"]:
            missing, extra = ref["txs"] - got["txs"], got["txs"] - ref["txs"]
            raise SystemExit(f"{name}: transactions differ: {len(missing)} missing, {len(extra)} extra, "
                             f"e.g. {sorted(missing)[:2]} / {sorted(extra)[:2]}")
        whose = "recovered senders" if name == "sender_indexer" else "the node's from"
        said.append(f"{len(got['txs']):,} txs with {whose}")
    logs = got.get("logs")
    if logs is not None:
        if got.get("logs_by_hash_lookup"):
            # A list: logs of a repeated transaction hash carry the lowest block's number.
            first = set(l for l in ref["logs"] if l[0] < chain["first"] + 10)
            mine = set(l for l in logs if l[0] < chain["first"] + 10)
            if len(logs) != len(ref["logs"]) or first != mine:
                raise SystemExit(f"{name}: logs differ: {len(logs)} rows, want {len(ref['logs'])}")
            said.append(f"{len(logs):,} logs (count; rows in the first 10 blocks)")
        else:
            if logs != ref["logs"]:
                missing, extra = ref["logs"] - logs, logs - ref["logs"]
                raise SystemExit(f"{name}: logs differ: {len(missing)} missing, {len(extra)} extra, "
                                 f"e.g. {sorted(missing)[:2]} / {sorted(extra)[:2]}")
            said.append(f"{len(logs):,} logs")
    if got.get("log_senders") is not None:
        sender = {(b, i): s for b, i, _, s in ref["txs"]}
        want = {(b, li, sender[(b, ti)]) for b, li, ti, _ in ref["logs"]}
        if got["log_senders"] != want:
            raise SystemExit(f"{name}: the senders of its logs differ from the recovered ones")
        said.append("each log's tx sender")
    if not said:
        raise SystemExit(f"{name}: rows() returned nothing to check")
    return ", ".join(said)


def main():
    os.makedirs(WORK, exist_ok=True)
    modules = {}
    sys.path.insert(0, os.path.join(REPO, "scripts", "peers"))
    for name in PEERS:
        modules[name] = importlib.import_module(name)
        root = os.path.join(REPO, "target", "peers", name)
        os.makedirs(root, exist_ok=True)
        t = time.monotonic()
        modules[name].install(root)
        print(f"{name}: installed ({time.monotonic() - t:.0f} s)", flush=True)
    if "sender_indexer" not in PEERS:
        raise SystemExit("BENCH_PEERS must include sender_indexer: its rows are the reference")

    pgdata = pgcluster.start(PG_BIN, WORK, PG_PORT)
    with open(os.path.join(pgdata, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    serve_file = os.path.join(WORK, "serve.json")
    server = subprocess.Popen([SERVER, "--bench"], stdin=subprocess.PIPE,
                              env=dict(os.environ, BENCH_SERVE=serve_file, BENCH_TXS=str(TXS)))
    try:
        while not os.path.exists(serve_file) or os.path.getsize(serve_file) == 0:
            if server.poll() is not None:
                raise SystemExit("the bench server stopped before serving")
            time.sleep(0.2)
        chain = json.load(open(serve_file))
        chain["pg"] = lambda db: f"postgres://postgres@127.0.0.1:{PG_PORT}/{db}"
        blocks = chain["last"] - chain["first"] + 1
        print(f"chain: blocks {chain['first']}..={chain['last']} ({blocks}), {chain['txs']:,} txs, "
              f"{chain['logs']:,} logs, {ROUNDS} rounds; {os.cpu_count()} cores", flush=True)
        results = {name: [] for name in PEERS}
        checked = {}
        ref = None
        for r in range(ROUNDS):
            for name in PEERS:
                ctx, m = run_once(modules[name], name, chain, postmaster, server.pid, r)
                got = modules[name].rows(ctx)
                if name == "sender_indexer":
                    if len(got["txs"]) != chain["txs"] or len(got["logs"]) != chain["logs"]:
                        raise SystemExit(f"sender-indexer stored {len(got['txs'])} txs and "
                                         f"{len(got['logs'])} logs of {chain['txs']} and {chain['logs']}")
                    ref = ref or got
                checked[name] = check(name, got, ref, chain)
                results[name].append(m)
                print(f"round {r + 1} {name}: {m['wall']:.2f} s, CPU {m['cpu']:.2f} s, "
                      f"PostgreSQL {m['pg']:.2f} s, server {m['server']:.2f} s", flush=True)
                psql(chain["pg"]("postgres"), f"DROP DATABASE {name}_{r}")
        per_tx = lambda s: f"{s * 1e6 / chain['txs']:.0f}"
        print()
        print(f"{chain['txs']:,} txs, {chain['logs']:,} logs in {blocks} blocks; medians of {ROUNDS} rounds")
        print()
        print("| tool | writes | rows, checked | wall s | txs/s | tool CPU µs/tx | PostgreSQL µs/tx "
              "| total µs/tx | server µs/tx |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name in PEERS:
            med = {k: statistics.median(m[k] for m in results[name]) for k in results[name][0]}
            print(f"| {modules[name].NAME} | {modules[name].WRITES} | {checked[name]} | {med['wall']:.2f} "
                  f"| {chain['txs'] / med['wall']:,.0f} | {per_tx(med['cpu'])} | {per_tx(med['pg'])} "
                  f"| {per_tx(med['cpu'] + med['pg'])} | {per_tx(med['server'])} |")
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        pgcluster.stop(PG_BIN, pgdata)


if __name__ == "__main__":
    main()
