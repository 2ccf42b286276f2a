#!/usr/bin/env bash
# Instructions executed by the recovery bench's cases, counted by
# callgrind: a ratio of our full path to the raw secp256k1 floor that the
# machine's noise cannot move (the same binary and inputs give the same
# counts). It does not see cache misses or instruction-level parallelism,
# so it complements `cargo bench --bench recovery`; it does not replace it.
#
# Needs valgrind (Debian: apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind not found: apt-get install valgrind" >&2; exit 1; }
exe=$(cargo bench --locked --bench recovery --no-run 2>&1 |
  sed -n 's/.*Executable benches\/recovery.rs (\(.*\))/\1/p' | tail -n1)
[ -x "$exe" ] || { echo "could not build the recovery bench" >&2; exit 1; }
count() {
  BENCH_ONLY=$1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    --collect-atstart=no --toggle-collect="recovery::only_$1" "$exe" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
floor=$(count floor)
printf '%-12s %15s  %s\n' case instructions "floor/case"
for case in floor full decode recover_tx; do
  n=$([ "$case" = floor ] && echo "$floor" || count "$case")
  awk -v c="$case" -v n="$n" -v f="$floor" 'BEGIN {
    r = (c == "decode") ? sprintf("decode = %.1f%% of the floor", 100 * n / f) : sprintf("%.3f", f / n);
    printf "%-12s %15.0f  %s\n", c, n, r }'
done
