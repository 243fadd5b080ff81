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
# they are placed, G·R/N: 6 at N = 3, 3 at N = 6.
#
#   bench/footprint.sh                 # about a minute
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

# run N G: one fresh cluster of N nodes, G groups; prints a row per node.
run() {
	local n=$1 g=$2 pids=() peers="" urls="" i
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
	for i in $(seq 1 "$n"); do
		local pid=${pids[$((i - 1))]}
		printf '%-4s %-5s %9s %6s %8s %10s\n' "N=$n" "n$i" "$(held "$W/n$i")" "$(ls "/proc/$pid/fd" | wc -l)" \
			"$(awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")" "$(du -sm "$W/n$i" | cut -f1)"
	done
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	sleep 1
}

printf '%-4s %-5s %9s %6s %8s %10s\n' "" node replicas fds "RSS MB" "disk MB"
run 3 6
run 6 6
