#!/usr/bin/env bash
# scaleout.sh: the share of the work each node does when groups are on R of
# N nodes (issue 30). Two cores cannot show throughput scaling, but they can
# show how the work divides: at one fixed offered load, a fresh cluster of
# N = 3 nodes (G = 3 groups, R = 3: every node a voter of every group) and
# one of N = 6 (G = 6, R = 3: each node a voter of three), alternately
# (A B A B, so drift in the machine falls on both). Each run pushes 1 KiB
# JSON in batches of 10 over 12 queues through every node's URL with
# `queen bench --rate`, and reads, per node process, the CPU time
# (utime + stime, /proc/<pid>/stat) and the bytes it wrote to storage
# (write_bytes, /proc/<pid>/io) over the measured run. It prints, per run,
# the busiest node's CPU seconds and bytes, the sum over nodes, and the
# push p99; then the ratios N6 / N3 of the busiest node, pair by pair
# (expected about 0.5: each node holds half the replicas it did).
#
#   bench/scaleout.sh                    # about 3 minutes
#   RATE=3000 DUR=20s PAIRS=2 bench/scaleout.sh
#
# Needs go, curl and python3. Uses ports 21632-21692 and 21732-21792 on
# 127.0.0.1, and a temporary directory. Linux only (/proc).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DUR=${DUR:-15s}
RATE=${RATE:-3000}
PAIRS=${PAIRS:-2}
W=$(mktemp -d /tmp/queen-scaleout.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT

(cd "$ROOT" && go build -o "$W/queen" ./cmd/queen)
Q=$W/queen
echo "the cluster secret of a scaleout.sh run" >"$W/secret"
TICK=$(getconf CLK_TCK)

# usage PID: "cpu_ticks write_bytes" of one process.
usage() {
	echo "$(awk '{print $14 + $15}' "/proc/$1/stat") $(awk '/^write_bytes/ {print $2}' "/proc/$1/io")"
}

# settled N G: every node answers healthy and every data group has three
# voters and a leader in the placement every node answers.
settled() {
	python3 - "$1" "$2" <<'EOF'
import json, sys, urllib.request
n, g = int(sys.argv[1]), int(sys.argv[2])
for i in range(1, n + 1):
    try:
        p = json.load(urllib.request.urlopen(f"http://127.0.0.1:{21622 + 10 * i}/api/v1/system/placement", timeout=2))
    except Exception:
        sys.exit(1)
    groups = [x for x in p.get("groups", []) if x["id"] > 0]
    if len(groups) != g or any(len(x["members"]) != 3 or not x.get("leader") for x in groups):
        sys.exit(1)
sys.exit(0)
EOF
}

# run N G LABEL: one measured run on a fresh cluster of N nodes, G groups.
run() {
	local n=$1 g=$2 label=$3 pids=() peers="" urls="" i
	rm -rf "$W"/n*
	for i in $(seq 1 "$n"); do
		peers+="${peers:+,}n$i@127.0.0.1:$((21722 + 10 * i))"
		urls+="${urls:+,}http://127.0.0.1:$((21622 + 10 * i))"
	done
	for i in $(seq 1 "$n"); do
		"$Q" serve --data "$W/n$i" --node-id n$i --http 127.0.0.1:$((21622 + 10 * i)) --raft 127.0.0.1:$((21722 + 10 * i)) \
			--peers "$peers" --groups "$g" --replicas 3 --balance=false --cluster-secret-file "$W/secret" --log-level warn 2>>"$W/n$i.log" &
		pids+=($!)
	done
	local waited=0
	until settled "$n" "$g"; do
		sleep 0.5
		waited=$((waited + 1))
		if [ $waited -gt 240 ]; then
			echo "$label: the cluster did not settle" >&2
			tail -5 "$W"/n*.log >&2
			exit 1
		fi
	done
	sleep 12 # leaderships spread (SpreadHold)
	# Warm up: the queues are placed and the connections open.
	"$Q" bench --url "$urls" --batch 10 --queues 12 --rate "$RATE" --duration 3s --queue load --json >/dev/null
	local before=() after=()
	for i in "${!pids[@]}"; do before+=("$(usage "${pids[$i]}")"); done
	"$Q" bench --url "$urls" --batch 10 --queues 12 --rate "$RATE" --duration "$DUR" --queue load --json >"$W/report.json"
	for i in "${!pids[@]}"; do after+=("$(usage "${pids[$i]}")"); done
	python3 - "$label" "$n" "$g" "$TICK" "$W/report.json" "${before[*]}" "${after[*]}" >>"$W/results" <<'EOF'
import json, sys
label, n, g, tick, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
b = [int(x) for x in sys.argv[6].split()]
a = [int(x) for x in sys.argv[7].split()]
cpu = [(a[2 * i] - b[2 * i]) / tick for i in range(n)]
wrote = [a[2 * i + 1] - b[2 * i + 1] for i in range(n)]
r = json.load(open(path))
push = r["ops"]["push"]
print(json.dumps({"label": label, "n": n, "g": g, "pushed": r["pushed"], "rate": push["msgs_per_s"],
                  "p99_ms": push["latency_ms"]["p99"], "cpu": cpu, "wrote": wrote}))
EOF
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	sync
	sleep 2
}

for k in $(seq 1 "$PAIRS"); do
	run 3 3 "N3 #$k"
	run 6 6 "N6 #$k"
done

python3 - "$W/results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'run':7} {'msgs/s':>7} {'p99 ms':>7} {'busiest CPU s':>14} {'all CPU s':>10} {'busiest MB':>11} {'all MB':>8}")
for r in rows:
    print(f"{r['label']:7} {r['rate']:7.0f} {r['p99_ms'] or 0:7.1f} {max(r['cpu']):14.2f} {sum(r['cpu']):10.2f} "
          f"{max(r['wrote']) / 1e6:11.1f} {sum(r['wrote']) / 1e6:8.1f}")
print("N6 / N3, pair by pair (busiest node):")
for a, b in zip(rows[0::2], rows[1::2]):
    print(f"  CPU {max(b['cpu']) / max(a['cpu']):.2f}, bytes written {max(b['wrote']) / max(a['wrote']):.2f}, "
          f"rate {b['rate'] / a['rate']:.2f}")
EOF
