"""A throwaway PostgreSQL cluster for the benchmark scripts (bench_peers.py,
bench_vs_ethereum_etl.py): initdb into a work directory, started on
127.0.0.1 only, run as the `postgres` user when the caller is root (CI
runs as root; PostgreSQL refuses to). Nothing here measures anything."""

import os
import subprocess


def as_postgres(cmd, **kw):
    """Runs `cmd` (as `postgres` when we are root); its output, captured."""
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def start(pg_bin, work, port):
    """A new cluster in `work`/pg listening on 127.0.0.1:`port`; its data directory."""
    pgdata = os.path.join(work, "pg")
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", "postgres", work], check=True)
    as_postgres([f"{pg_bin}/initdb", "-D", pgdata, "-U", "postgres", "--auth=trust"])
    as_postgres([f"{pg_bin}/pg_ctl", "-D", pgdata, "-w", "-l", os.path.join(work, "pg.log"), "-o",
                 f"-p {port} -c listen_addresses=127.0.0.1 -k {work}", "start"])
    return pgdata


def stop(pg_bin, pgdata):
    as_postgres([f"{pg_bin}/pg_ctl", "-D", pgdata, "-m", "immediate", "stop"])
