#!/usr/bin/env bash
# groups.sh: what spreading queues over Raft groups costs and buys (issue 16).
# Three nodes on loopback run with --groups 1, then --groups 3, twice over
# (G1 G3 G1 G3, so that drift in the machine falls on both). Each run pushes
# 1 KiB JSON in batches of 100 over 6 queues through all three URLs with
# `queen bench`, and reads the CPU time the three node processes spent
# (utime + stime from /proc/<pid>/stat) over the measured run. It prints the
# rate and the CPU per message of each run, and the ratios G3 / G1 of each
# pair. The load generator's own CPU is not counted.
#
#   bench/groups.sh              # about 3 minutes
#   DUR=15s PAIRS=3 bench/groups.sh
#
# Needs go, curl and python3. Uses ports 19632-19652 and 19732-19752 on
# 127.0.0.1, and a temporary directory. Linux only (/proc).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DUR=${DUR:-8s}
PAIRS=${PAIRS:-2}
W=$(mktemp -d /tmp/queen-groups.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT

(cd "$ROOT" && go build -o "$W/queen" ./cmd/queen)
Q=$W/queen
echo "the cluster secret of a groups.sh run" >"$W/secret"
peers=n1@127.0.0.1:19732,n2@127.0.0.1:19742,n3@127.0.0.1:19752
URLS=http://127.0.0.1:19632,http://127.0.0.1:19642,http://127.0.0.1:19652
TICK=$(getconf CLK_TCK)

# cpu PIDS...: the CPU ticks the processes have used.
cpu() {
	local t=0 p
	for p in "$@"; do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	echo $t
}

# spread G: every node answers 200 and, with G > 1, the data groups are led
# by three different nodes.
spread() {
	python3 - "$1" <<'EOF'
import json, sys, urllib.request
g = int(sys.argv[1])
leaders = set()
for p in (19632, 19642, 19652):
    try:
        h = json.load(urllib.request.urlopen(f"http://127.0.0.1:{p}/health", timeout=2))
    except Exception:
        sys.exit(1)
    if h.get("status") != "healthy":
        sys.exit(1)
    for row in h.get("groups", []):
        if row["group"] > 0 and row["role"] == "leader":
            leaders.add(row["leaderHttp"])
sys.exit(0 if g == 1 or len(leaders) == min(g, 3) else 1)
EOF
}

# run G LABEL: one measured run on a fresh three-node cluster.
run() {
	local g=$1 label=$2 pids=()
	rm -rf "$W"/n*
	for i in 1 2 3; do
		"$Q" serve --data "$W/n$i" --node-id n$i --http 127.0.0.1:$((19622 + 10 * i)) --raft 127.0.0.1:$((19722 + 10 * i)) \
			--peers $peers --groups "$g" --cluster-secret-file "$W/secret" --log-level warn 2>>"$W/n$i.log" &
		pids+=($!)
	done
	local waited=0
	until spread "$g"; do
		sleep 0.5
		waited=$((waited + 1))
		if [ $waited -gt 120 ]; then
			echo "groups $g: the cluster did not settle" >&2
			tail -5 "$W"/n*.log >&2
			exit 1
		fi
	done
	# Warm up: the queues are placed and the connections open.
	"$Q" bench --url $URLS --batch 100 --queues 6 --duration 2s --queue warm --json >/dev/null
	local before after
	before=$(cpu "${pids[@]}")
	"$Q" bench --url $URLS --batch 100 --queues 6 --duration "$DUR" --queue load --json >"$W/report.json"
	after=$(cpu "${pids[@]}")
	python3 - "$label" "$g" $((after - before)) "$TICK" "$W/report.json" >>"$W/results" <<'EOF'
import json, sys
label, g, ticks, tick, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
r = json.load(open(path))
pushed = r["pushed"]
push = r["ops"]["push"]
cpu_us = ticks / tick * 1e6
print(json.dumps({"label": label, "groups": g, "pushed": pushed, "rate": push["msgs_per_s"],
                  "p99_ms": push["latency_ms"]["p99"], "cpu_us_per_msg": cpu_us / pushed if pushed else None}))
EOF
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	sync
	sleep 2
}

for k in $(seq 1 "$PAIRS"); do
	run 1 "G1 #$k"
	run 3 "G3 #$k"
done

python3 - "$W/results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'run':8} {'msgs/s':>9} {'p99 ms':>7} {'CPU µs/msg (3 nodes)':>21}")
for r in rows:
    print(f"{r['label']:8} {r['rate']:9.0f} {r['p99_ms'] or 0:7.1f} {r['cpu_us_per_msg']:21.1f}")
print("G3 / G1, pair by pair:")
for a, b in zip(rows[0::2], rows[1::2]):
    print(f"  CPU per message {b['cpu_us_per_msg'] / a['cpu_us_per_msg']:.2f}, rate {b['rate'] / a['rate']:.2f}")
EOF
