#!/usr/bin/env bash
# footprint.sh: what each node holds when groups are on R of N nodes
# (issue 39, "groups only where they are placed"). A fresh cluster of
# N = 3 and one of N = 6, both with G = 6 data groups of R = 3 voters, are
# given the same data (COUNT messages of 1 KiB JSON over 12 queues through
# every node's URL); once the writes are applied everywhere, it reads per
# node process: the replicas it holds open (data groups whose engine
# directory holds a Pebble MANIFEST, the directory not counted), its open
# file descriptors (/proc/<pid>/fd), its resident memory (VmRSS) and the
# bytes of its data directory (du). With every group on every node (before
# issue 39) each node held 6 replicas whatever N; with groups only where
# they are placed, G·R/N: 6 at N = 3, 3 at N = 6. Last, the disk a node
# frees when replicas leave it: three nodes with the data, three more join
# (grow), and every node is read again once the founders have retired the
# replicas that moved away.
#
#   bench/footprint.sh                 # about five minutes
#   COUNT=50000 bench/footprint.sh
#   QUEEN=/path/to/queen bench/footprint.sh   # another build (before/after)
#
# Needs go, python3 and /proc (Linux). Uses ports 22632-22692 and
# 22732-22792 on 127.0.0.1, and a temporary directory.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
COUNT=${COUNT:-30000}
W=$(mktemp -d /tmp/queen-footprint.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT

Q=${QUEEN:-$W/queen}
[ -n "${QUEEN:-}" ] || (cd "$ROOT" && go build -o "$W/queen" ./cmd/queen)
echo "the cluster secret of a footprint.sh run" >"$W/secret"

# settled N G: every node answers the placement with every data group on
# three voters and a leader.
settled() {
	python3 - "$1" "$2" <<'EOF'
import json, sys, urllib.request
n, g = int(sys.argv[1]), int(sys.argv[2])
for i in range(1, n + 1):
    try:
        p = json.load(urllib.request.urlopen(f"http://127.0.0.1:{22622 + 10 * i}/api/v1/system/placement", timeout=2))
    except Exception:
        sys.exit(1)
    groups = [x for x in p.get("groups", []) if x["id"] > 0]
    if len(groups) != g or any(len(x["members"]) != 3 or not x.get("leader") for x in groups):
        sys.exit(1)
sys.exit(0)
EOF
}

# held DIR: the data groups whose replica a node's data directory holds
# open (a Pebble MANIFEST in the group's engine directory).
held() {
	local dir=$1 k=0 e
	for e in "$dir/engine" "$dir"/groups/*/engine; do
		case $e in */groups/0/engine) continue ;; esac
		if compgen -G "$e/MANIFEST-*" >/dev/null; then k=$((k + 1)); fi
	done
	echo $k
}

# measure N LABEL: a row per node of the running cluster.
measure() {
	local n=$1 label=$2 i
	for i in $(seq 1 "$n"); do
		local pid=${pids[$((i - 1))]}
		printf '%-6s %-5s %9s %6s %8s %10s\n' "$label" "n$i" "$(held "$W/n$i")" "$(ls "/proc/$pid/fd" | wc -l)" \
			"$(awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")" "$(du -sm "$W/n$i" | cut -f1)"
	done
}

# spreadOver N: every data group has three voters and a leader, and the
# nodes' shares differ by one at most, as node 1's placement says.
spreadOver() {
	python3 - "$1" <<'EOF'
import collections, json, sys, urllib.request
n = int(sys.argv[1])
try:
    p = json.load(urllib.request.urlopen("http://127.0.0.1:22632/api/v1/system/placement", timeout=2))
except Exception:
    sys.exit(1)
per = collections.Counter()
for x in p.get("groups", []):
    if x["id"] > 0:
        if len(x["members"]) != 3 or not x.get("leader"):
            sys.exit(1)
        per.update(x["members"])
sys.exit(0 if len(per) == n and max(per.values()) - min(per.values()) <= 1 else 1)
EOF
}

# grow: three nodes with the data, measured; then n4..n6 join through n1,
# the replicas spread, and once the founders have retired the replicas
# that moved (queen serve retires one 30 s after its removal, then frees
# it 30 s later: RETIRE_WAIT), every node is measured again (label 3->6).
grow() {
	local i
	KEEP=1 run 3 6
	for i in 4 5 6; do
		"$Q" serve --data "$W/n$i" --node-id n$i --http 127.0.0.1:$((22622 + 10 * i)) --raft 127.0.0.1:$((22722 + 10 * i)) \
			--join http://127.0.0.1:22632 --groups 6 --balance=false --cluster-secret-file "$W/secret" --log-level warn 2>>"$W/n$i.log" &
		pids+=($!)
	done
	local waited=0
	until spreadOver 6; do
		sleep 1
		waited=$((waited + 1))
		if [ $waited -gt 600 ]; then
			echo "grow: the replicas did not spread over six nodes" >&2
			tail -5 "$W"/n*.log >&2
			exit 1
		fi
	done
	sleep "${RETIRE_WAIT:-75}"
	measure 6 "3->6"
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
}

# run N G: one fresh cluster of N nodes, G groups; prints a row per node.
run() {
	local n=$1 g=$2 peers="" urls="" i
	pids=()
	rm -rf "$W"/n*
	for i in $(seq 1 "$n"); do
		peers+="${peers:+,}n$i@127.0.0.1:$((22722 + 10 * i))"
		urls+="${urls:+,}http://127.0.0.1:$((22622 + 10 * i))"
	done
	for i in $(seq 1 "$n"); do
		"$Q" serve --data "$W/n$i" --node-id n$i --http 127.0.0.1:$((22622 + 10 * i)) --raft 127.0.0.1:$((22722 + 10 * i)) \
			--peers "$peers" --groups "$g" --replicas 3 --balance=false --cluster-secret-file "$W/secret" --log-level warn 2>>"$W/n$i.log" &
		pids+=($!)
	done
	local waited=0
	until settled "$n" "$g"; do
		sleep 0.5
		waited=$((waited + 1))
		if [ $waited -gt 240 ]; then
			echo "N=$n: the cluster did not settle" >&2
			tail -5 "$W"/n*.log >&2
			exit 1
		fi
	done
	"$Q" bench --url "$urls" --batch 50 --queues 12 --messages "$COUNT" --duration 2m --queue load --json >"$W/report.json"
	sleep 5 # the followers apply the last writes
	measure "$n" "N=$n"
	[ -z "${KEEP:-}" ] || return 0
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	sleep 1
}

printf '%-6s %-5s %9s %6s %8s %10s\n' "" node replicas fds "RSS MB" "disk MB"
run 3 6
run 6 6
grow
