#!/usr/bin/env bash
# The quickstart (README): from a fresh clone to recovered senders in SQL, with
# nothing else to set up. Installs what is missing (scripts/install.sh), builds
# sender-indexer, starts a throwaway anvil on a free local port, sends every
# kind of transaction it can verify plus token transfers that emit events,
# runs `sync` into an embedded PostgreSQL cluster (backfill, then follow while
# three more transactions arrive), prints two cookbook queries, and stops
# anvil. Safe to run again: each run starts a new chain and a fresh demo
# database.
#
# It must not touch the default embedded database, a PostgreSQL service or
# anything but its own directory, and listens on 127.0.0.1 only.
#
# Env: SENDER_INDEXER_BIN   use this binary instead of building one (tests)
#      SENDER_INDEXER_DEMO_DIR  where the demo's database lives
#                           (default /tmp/sender-indexer-demo-<uid>)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
say() { printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"; }
die() { printf 'demo.sh: %s\n' "$*" >&2; exit 1; }

. scripts/install.sh

# --- the binary -------------------------------------------------------------
if [ -n "${SENDER_INDEXER_BIN:-}" ]; then
  bin=$SENDER_INDEXER_BIN
else
  command -v cargo >/dev/null 2>&1 ||
    die "cargo is missing: install Rust from https://rustup.rs, then run scripts/demo.sh again"
  say "building sender-indexer (release; the first build takes several minutes)"
  cargo build --release --locked --quiet
  bin=target/release/sender-indexer
fi
[ -x "$bin" ] || die "no executable at $bin"

# --- the demo's directory: fresh each run ----------------------------------
# A new anvil chain has other block hashes than the one indexed last time,
# so the demo database starts empty. Only a directory this script made (it
# holds the marker) is ever removed.
demo=${SENDER_INDEXER_DEMO_DIR:-/tmp/sender-indexer-demo-$(id -u)}
marker=.sender-indexer-demo
if [ -e "$demo" ]; then
  [ -e "$demo/$marker" ] || die "$demo exists and was not made by this script; set SENDER_INDEXER_DEMO_DIR to another directory"
  # A server left running by an interrupted run: stop it (fast shutdown).
  if [ -f "$demo/pg/postmaster.pid" ]; then
    pg_pid=$(head -n1 "$demo/pg/postmaster.pid")
    if kill -0 "$pg_pid" 2>/dev/null; then
      kill -INT "$pg_pid"
      for _ in $(seq 100); do kill -0 "$pg_pid" 2>/dev/null || break; sleep 0.1; done
    fi
  fi
  rm -rf "$demo"
fi
mkdir -p "$demo"
chmod 755 "$demo" # as root the server runs as `postgres`, which must enter it
touch "$demo/$marker"

# --- anvil ------------------------------------------------------------------
anvil_pid='' sync_pid=''
cleanup() {
  [ -z "$sync_pid" ] || kill -INT "$sync_pid" 2>/dev/null || true
  [ -z "$sync_pid" ] || wait "$sync_pid" 2>/dev/null || true
  [ -z "$anvil_pid" ] || kill "$anvil_pid" 2>/dev/null || true
}
trap cleanup EXIT

say "starting anvil $(anvil --version | sed -n 's/.*Version: \([^ ]*\).*/\1/p') on a free port of 127.0.0.1"
anvil --host 127.0.0.1 --port 0 --hardfork prague >"$demo/anvil.log" 2>&1 &
anvil_pid=$!
for _ in $(seq 300); do
  grep -q '^Listening on ' "$demo/anvil.log" && break
  kill -0 "$anvil_pid" 2>/dev/null || die "anvil exited: $(cat "$demo/anvil.log")"
  sleep 0.1
done
listen=$(sed -n 's/^Listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$demo/anvil.log")
[ -n "$listen" ] || die "anvil did not start within 30 s: $(cat "$demo/anvil.log")"
rpc=http://$listen
echo "anvil: $rpc (its log: $demo/anvil.log)"

# The dev accounts and keys anvil printed.
mapfile -t addr < <(sed -n '/^Available Accounts/,/^Private Keys/ s/^([0-9]) \(0x[0-9a-fA-F]\{40\}\).*/\1/p' "$demo/anvil.log")
mapfile -t key < <(sed -n '/^Private Keys/,$ s/^([0-9]) \(0x[0-9a-f]\{64\}\).*/\1/p' "$demo/anvil.log")
[ "${#addr[@]}" -eq 10 ] && [ "${#key[@]}" -eq 10 ] || die "could not read anvil's dev accounts from $demo/anvil.log"

# send FROM_ACCOUNT ARGS...: cast send, waiting for the block (automine).
send() {
  local from=$1
  shift
  cast send --rpc-url "$rpc" --private-key "${key[$from]}" "$@" >/dev/null
}

# --- transactions -----------------------------------------------------------
# A minimal token: `transfer(address to, uint256 value)` emits
# Transfer(address indexed from = caller, address indexed to, uint256 value).
#   PUSH1 36 CALLDATALOAD PUSH1 0 MSTORE       memory[0..32] = value
#   PUSH1 4 CALLDATALOAD CALLER PUSH32 topic0  topics: Transfer, caller, to
#   PUSH1 32 PUSH1 0 LOG3 STOP
transfer_topic=ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef
runtime=602435600052600435337f${transfer_topic}60206000a300
len=$(printf '%02x' $((${#runtime} / 2)))
initcode=0x60${len}600c60003960${len}6000f3${runtime}

say "sending transactions of every kind"
deploy() {
  cast send --rpc-url "$rpc" --private-key "${key[$1]}" --json --create "$initcode" |
    sed -n 's/.*"contractAddress":"\(0x[0-9a-fA-F]\{40\}\)".*/\1/p'
}
token=$(deploy 0)
token2=$(deploy 2)
[ -n "$token" ] && [ -n "$token2" ] || die "deploying the demo token failed"
echo "contract creations: tokens $token (by account 0) and $token2 (by account 2)"

# Token transfers (EIP-1559), each emitting a Transfer event:
# account 1 sends 8, account 2 sends 5, account 3 sends 3.
for i in $(seq 8); do send 1 "$token" 'transfer(address,uint256)' "${addr[4]}" $((i * 100)); done
for i in $(seq 5); do send 2 "$token" 'transfer(address,uint256)' "${addr[5]}" $((i * 10)); done
for i in $(seq 3); do send 3 "$token2" 'transfer(address,uint256)' "${addr[6]}" 7; done
# The same call as a legacy and as an EIP-2930 transaction.
send 1 --legacy "$token" 'transfer(address,uint256)' "${addr[6]}" 1
send 3 --legacy --access-list "[{\"address\":\"$token\",\"storageKeys\":[]}]" "$token" 'transfer(address,uint256)' "${addr[6]}" 2
# Plain ether transfers: legacy, EIP-2930, EIP-1559.
send 4 --legacy "${addr[9]}" --value 1ether
send 5 --legacy --access-list "[{\"address\":\"${addr[9]}\",\"storageKeys\":[]}]" "${addr[9]}" --value 1ether
send 6 "${addr[9]}" --value 1ether
# EIP-7702: account 7 delegates its account to the token code itself; account
# 8 pays for account 9's signed authorization. Then account 7's account, now
# running the token code, emits a Transfer when account 4 calls it.
send 7 --auth "$token" "${addr[7]}"
signed=$(cast wallet sign-auth --rpc-url "$rpc" "$token" --private-key "${key[9]}")
send 8 --auth "$signed" "${addr[9]}"
send 4 "${addr[7]}" 'transfer(address,uint256)' "${addr[1]}" 5
# Blob (type 3) transactions are left out: anvil 1.7.1 commits its
# transactions root over the blob sidecar (foundry-rs/foundry#15132), so such
# a block does not verify and the indexer would rightly refuse it.
cast rpc --rpc-url "$rpc" anvil_mine 10 >/dev/null # and a few empty blocks
head=$(cast block-number --rpc-url "$rpc")
echo "anvil is at block $head (a block per transaction, then 10 empty ones)"

# --- sync -------------------------------------------------------------------
# A free port for /metrics, which tells this script how far sync got.
metrics_port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
indexed() {
  local n
  n=$( (
    exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
    printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
    sed -n 's/^sender_indexer_indexed_block \([0-9]*\)\r\{0,1\}$/\1/p' <&3
  ) 2>/dev/null || true)
  echo "${n:--1}"
}
wait_indexed() {
  for _ in $(seq 600); do
    [ "$(indexed)" -ge "$1" ] && return 0
    kill -0 "$sync_pid" 2>/dev/null || die "sync exited before block $1"
    sleep 0.1
  done
  die "sync did not reach block $1 within 60 s"
}

cat >"$demo/demo.toml" <<EOF
# The demo's settings (config/default.toml documents every one).
[[events]]
signature = "Transfer(address indexed from, address indexed to, uint256 value)"
table = "transfers"
EOF
genesis=$(cast block 0 --field hash --rpc-url "$rpc")
idx=("$bin" --config "$demo/demo.toml" --data-dir "$demo/pg")
say "indexing with: sender-indexer --rpc-url $rpc --trusted-block 0:$genesis sync"
"${idx[@]}" --rpc-url "$rpc" --trusted-block "0:$genesis" \
  --metrics-addr "127.0.0.1:$metrics_port" --poll-interval-ms 200 sync &
sync_pid=$!
wait_indexed "$head"
say "sync caught up with block $head and follows the head; sending 3 more transactions"
send 1 "$token" 'transfer(address,uint256)' "${addr[2]}" 1
send 2 "${addr[9]}" --value 1ether
send 3 "$token2" 'transfer(address,uint256)' "${addr[4]}" 1
head=$(cast block-number --rpc-url "$rpc")
wait_indexed "$head"
echo "followed up to block $head; stopping sync (SIGINT: it commits and exits)"
kill -INT "$sync_pid"
wait "$sync_pid" || die "sync did not exit cleanly"
sync_pid=''
kill "$anvil_pid"
wait "$anvil_pid" 2>/dev/null || true
anvil_pid=''
echo "anvil stopped"

# --- the answers ------------------------------------------------------------
q_senders="SELECT '0x' || encode(sender, 'hex') AS sender, count(*) AS txs, bool_and(from_matches) AS node_from_agrees FROM transactions GROUP BY sender ORDER BY txs DESC, sender LIMIT 10"
q_transfers="SELECT '0x' || encode(t.sender, 'hex') AS signed_by, count(*) AS transfers, sum(e.value) AS tokens, count(DISTINCT e.address) AS contracts FROM transfers e JOIN transactions t USING (block_number, tx_index) GROUP BY t.sender ORDER BY transfers DESC, signed_by"
say "top senders, recovered from the signatures"
echo "sql> $q_senders"
RUST_LOG=warn "${idx[@]}" sql "$q_senders"
say "the senders behind the Transfer events (decoded into table transfers)"
echo "sql> $q_transfers"
RUST_LOG=warn "${idx[@]}" sql "$q_transfers"

say "done"
cat <<EOF
Query further (the demo database stays in $demo until the next run):
  $bin --data-dir $demo/pg sql "SELECT * FROM logs_with_sender LIMIT 5"
  $bin --data-dir $demo/pg status
Index a real chain into the default embedded database (or your own server
with DATABASE_URL=postgres://...):
  RPC_URL=https://your-endpoint $bin backfill --from 19000000 --to 19000100
The schema and a SQL cookbook are in README.md.
EOF
