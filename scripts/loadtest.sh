#!/usr/bin/env bash
# The issue-17 load test: a 4-validator testnet on loopback at 1 s blocks
# (`ogpud testnet` + four `ogpud start` processes), `ogpud loadgen` sending
# market transactions to it for DURATION, then everything stopped. The
# report (per second and at the end) goes to stdout and to
# $OUT/loadgen.log, the JSON report to $OUT/report.json, the nodes' logs to
# $OUT/net/nodeI.log. docs/benchmarks.md "Market messages on a 4-validator
# loopback net (issue 17)" has the results.
#
# Settings (environment): DURATION (5m), RATE (1000 tx/s), MAX_TXS
# (400000), MODE (market), CLIENTS (50), PROVIDERS (200), BIDDERS (4),
# COMMIT (1s: timeout_commit), MAX_BLOCK_GAS (200000000; the default
# 10,000,000 holds about 180 bids), PORT (36656: node i uses PORT+10i and
# PORT+10i+1), OUT (a new directory under /tmp), PROFILE (seconds: take a
# CPU profile of node0 that long, from halfway through the load, into
# $OUT/node0.cpu.pprof), BIN (bin).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5m}
RATE=${RATE:-1000}
MAX_TXS=${MAX_TXS:-400000}
MODE=${MODE:-market}
CLIENTS=${CLIENTS:-50}
PROVIDERS=${PROVIDERS:-200}
BIDDERS=${BIDDERS:-4}
COMMIT=${COMMIT:-1s}
MAX_BLOCK_GAS=${MAX_BLOCK_GAS:-200000000}
PORT=${PORT:-36656}
BIN=${BIN:-bin}
PROFILE=${PROFILE:-}
OUT=${OUT:-$(mktemp -d /tmp/ogpu-loadtest.XXXXXX)}
mkdir -p "$OUT"

go build -o "$BIN/" ./cmd/ogpud
OGPUD=$BIN/ogpud

faucet=$("$OGPUD" loadgen faucet "$OUT/faucet.hex")
"$OGPUD" testnet --validators 4 --output "$OUT/net" --chain-id ogpu-loadtest --starting-port "$PORT" \
	--timeout-commit "$COMMIT" --max-block-gas "$MAX_BLOCK_GAS" --account "$faucet=10000000ogpu" >/dev/null
if [ -n "$PROFILE" ]; then
	sed -i "s|^pprof_laddr = .*|pprof_laddr = \"127.0.0.1:$((PORT + 9))\"|" "$OUT/net/node0/config/config.toml"
fi

pids=()
stop() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop EXIT
nodes=()
for i in 0 1 2 3; do
	"$OGPUD" start --home "$OUT/net/node$i" --log_level error >"$OUT/net/node$i.log" 2>&1 &
	pids+=($!)
	nodes+=(--node "http://127.0.0.1:$((PORT + 10 * i + 1))")
done
for _ in $(seq 120); do
	h=$(curl -s "http://127.0.0.1:$((PORT + 1))/status" | sed -n 's/.*"latest_block_height": *"\([0-9]*\)".*/\1/p' || true)
	[ "${h:-0}" -ge 2 ] && break
	sleep 1
done

if [ -n "$PROFILE" ]; then
	secs=$(( $(echo "$DURATION" | sed 's/m$/*60/; s/s$//' | bc) ))
	( until grep -q '^setup:' "$OUT/loadgen.log" 2>/dev/null; do sleep 1; done
	  sleep $(( secs / 2 )); curl -s -o "$OUT/node0.cpu.pprof" "http://127.0.0.1:$((PORT + 9))/debug/pprof/profile?seconds=$PROFILE" ) &
	prof=$!
fi

echo "testnet in $OUT; loadgen: $MODE at $RATE tx/s for $DURATION"
"$OGPUD" loadgen "${nodes[@]}" --mode "$MODE" --rate "$RATE" --duration "$DURATION" --max-txs "$MAX_TXS" \
	--clients "$CLIENTS" --providers "$PROVIDERS" --bidders "$BIDDERS" --faucet-key "$OUT/faucet.hex" \
	--json "$OUT/report.json" | tee "$OUT/loadgen.log"
if [ -n "${prof:-}" ]; then wait "$prof"; fi
