#!/usr/bin/env bash
# reads.sh: what a read costs in each consistency mode (docs/api.md §1.6),
# in one run on one machine. Three nodes on loopback with a cluster secret;
# `queen bench --workload read` GETs one queue's resource through the
# leader and through a follower, default (linearizable: a follower asks the
# leader for a read index and waits to apply it) against ?consistency=stale
# (local state), idle and again under a paced push load on the leader; then
# a cluster without a secret, whose followers relay the whole read.
#
#   bench/reads.sh            # about 2 minutes
#   DUR=15s CONNS=16 bench/reads.sh
#   QUEEN=/path/to/queen bench/reads.sh   # a build of your own (another commit's)
#
# Needs go, curl and python3. Uses ports 16632-16652 and 17632-17652 on
# 127.0.0.1 (as compare.sh: do not run both at once) and a temporary
# directory.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DUR=${DUR:-8s}
CONNS=${CONNS:-8}
W=$(mktemp -d /tmp/queen-reads.XXXXXX)
OUT=$W/results.jsonl
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT

if [ -n "${QUEEN:-}" ]; then
	Q=$QUEEN
else
	echo "building into $W" >&2
	(cd "$ROOT" && go build -o "$W/queen" ./cmd/queen)
	Q=$W/queen
fi
echo "the cluster secret of a reads.sh run" >"$W/secret"
. "$ROOT/bench/lib.sh"

# fill: the queue read, made and filled a little, visible on the follower.
fill() {
	"$Q" bench --url "$leader" --queue rq --messages 1000 --json >/dev/null 2>&1
	until curl -sf "$follower/api/v1/resources/queues/rq?consistency=stale" >/dev/null; do sleep 0.1; done
}
# read LABEL URL QUERY
read_run() {
	echo "== $1" >&2
	local line
	line=$("$Q" bench --url "$2" --workload read --path "/api/v1/resources/queues/rq$3" --conns "$CONNS" --duration "$DUR" --json)
	printf '{"label":"%s","report":%s}\n' "$1" "$line" >>"$OUT"
}
four() { # four SUFFIX: the four reads
	read_run "leader, default$1" "$leader" ""
	read_run "leader, stale$1" "$leader" "?consistency=stale"
	read_run "follower, default$1" "$follower" ""
	read_run "follower, stale$1" "$follower" "?consistency=stale"
}

SECRET=$W/secret start3
fill
four ""
# The same under pushes: 10,000 msgs/s on the leader, for longer than the
# four reads take.
"$Q" bench --url "$leader" --queue load --rate 10000 --duration 120s --json >"$W/load.json" 2>/dev/null &
lpid=$!
sleep 2
four " (pushes 10k/s)"
kill $lpid 2>/dev/null || true
wait $lpid 2>/dev/null || true
stop3

SECRET="" start3
fill
read_run "follower, default, no secret (relayed)" "$follower" ""
stop3

python3 - "$OUT" <<'EOF'
import json, sys
print(f"{'read /api/v1/resources/queues/rq':44} {'reads/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors'}")
for line in open(sys.argv[1]):
    r = json.loads(line); rep = r["report"]; op = rep["ops"]["read"]
    print(f"{r['label']:44} {op['msgs_per_s']:>9.0f} {op['latency_ms']['p50']:>8.3f} {op['latency_ms']['p99']:>8.3f} {rep['errors'] or ''}")
EOF
