#!/usr/bin/env bash
# cpu.sh: the server CPU one node spends per pushed message (issue 41), for
# one or more builds, interleaved. Each run starts a fresh node on a
# temporary directory, warms it for 2 s, then pushes 1 KiB JSON in batches of
# 100 on 32 connections with `queen bench` for DUR, and reads the CPU time the
# node process spent (utime + stime from /proc/<pid>/stat) over the measured
# run. The driver is the first build's `queen bench` for every run, so only
# the server changes. Rounds alternate the order of the builds (A B, B A, ...)
# so that drift in a shared machine falls on all of them alike; it prints
# each run and each build's medians.
#
#   bench/cpu.sh /tmp/queen-main /tmp/queen              # 2 rounds of 20 s
#   ROUNDS=3 DUR=20s PROFILE=/tmp/prof bench/cpu.sh A B  # and a CPU profile of each run
#   RATE=40000 bench/cpu.sh A B                          # paced: the same load on every build
#   MESSAGES=1000000 DUR=60s bench/cpu.sh A B            # the same number of messages for every build
#   BATCH=1 SIZE=256 RATE=4000 bench/cpu.sh A B           # single small messages (the warm-up stays 100 x 1 KiB)
#
# Unpaced runs say what a build reaches; but on a shared machine the rate
# moves with the other load, and the CPU per message moves with the rate (a
# slower node commits smaller groups). RATE=R paces the measured run to R
# msgs/s (queen bench --rate), below what every build reaches, so that each
# build's CPU per message is measured at the same load. MESSAGES=N ends
# each measured run after N pushed messages (DUR still bounds it): Pebble's
# compactions rewrite more per message the larger the store, so a build
# that pushes more in a fixed time also pays more per message; a fixed count
# gives every build the same store to compact.
#
# PROFILE=DIR starts each node with --pprof and keeps a CPU profile of the
# measured run in DIR (build-round.pprof); pprof's sampling costs the node
# about 1% more CPU, alike for every build. The profile lasts DUR, and the
# CPU is then read when it ends: with MESSAGES, both include the flushes and
# compactions the run left behind until DUR. Needs curl and python3. Uses
# ports 17632 and 17633 on 127.0.0.1, and a temporary directory. Linux only.
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: bench/cpu.sh QUEEN_BINARY..." >&2; exit 2; }
DUR=${DUR:-20s}
ROUNDS=${ROUNDS:-2}
PROFILE=${PROFILE:-}
RATE=${RATE:-}
MESSAGES=${MESSAGES:-}
BATCH=${BATCH:-100}
SIZE=${SIZE:-1024}
W=$(mktemp -d /tmp/queen-cpu.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT
DRIVER=$1
TICK=$(getconf CLK_TCK)
secs=${DUR%s}
[ -n "$PROFILE" ] && mkdir -p "$PROFILE"

# run BINARY ROUND: one measured run on a fresh node.
run() {
	local bin=$1 round=$2 name
	name=$(basename "$bin")
	rm -rf "$W/data"
	"$bin" serve --data "$W/data" --http 127.0.0.1:17632 ${PROFILE:+--pprof 127.0.0.1:17633} --log-level warn 2>>"$W/node.log" &
	local pid=$!
	until curl -s http://127.0.0.1:17632/health 2>/dev/null | grep -q '"role":"leader"'; do sleep 0.2; done
	"$DRIVER" bench --url http://127.0.0.1:17632 --batch 100 --size 1024 --conns 32 --duration 2s --queue warm --json >/dev/null
	local prof=""
	if [ -n "$PROFILE" ]; then
		curl -s -o "$PROFILE/$name-$round.pprof" "http://127.0.0.1:17633/debug/pprof/profile?seconds=$secs" &
		prof=$!
	fi
	local before after
	before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	"$DRIVER" bench --url http://127.0.0.1:17632 --batch "$BATCH" --size "$SIZE" --conns 32 --duration "$DUR" ${RATE:+--rate "$RATE"} ${MESSAGES:+--messages "$MESSAGES"} --queue load --json >"$W/report.json"
	[ -n "$prof" ] && wait "$prof"
	after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	python3 - "$name" "$round" $((after - before)) "$TICK" "$W/report.json" "$(cut -d' ' -f1 /proc/loadavg)" >>"$W/results" <<'EOF'
import json, sys
name, rnd, ticks, tick, path, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
r = json.load(open(path))
push = r["ops"]["push"]
print(json.dumps({"build": name, "round": rnd, "pushed": r["pushed"], "rate": push["msgs_per_s"],
                  "p99_ms": push["latency_ms"]["p99"], "us_per_msg": ticks / tick * 1e6 / r["pushed"], "load": load}))
EOF
	tail -1 "$W/results" >&2
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -rf "$W/data"
	sync
	sleep 2
}

for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then order=("$@"); else order=(); for ((i = $#; i >= 1; i--)); do order+=("${!i}"); done; fi
	for b in "${order[@]}"; do run "$b" "$r"; done
done

python3 - "$W/results" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'build':16} {'round':>5} {'msgs/s':>9} {'p99 ms':>7} {'µs CPU/msg':>10} {'load':>5}")
for r in rows:
    print(f"{r['build']:16} {r['round']:>5} {r['rate']:9.0f} {r['p99_ms']:7.1f} {r['us_per_msg']:10.2f} {r['load']:>5}")
print("medians:")
for b in dict.fromkeys(r["build"] for r in rows):
    mine = [r for r in rows if r["build"] == b]
    print(f"{b:16} {'':>5} {statistics.median(r['rate'] for r in mine):9.0f} {statistics.median(r['p99_ms'] for r in mine):7.1f} "
          f"{statistics.median(r['us_per_msg'] for r in mine):10.2f}")
EOF
