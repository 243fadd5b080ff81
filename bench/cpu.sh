#!/usr/bin/env bash
# cpu.sh: the server CPU queen spends per pushed message (issue 41), for one
# or more builds, next to NATS JetStream's, interleaved, in one run. Issue
# 41 is done when one node's CPU per message is at most JetStream R1's and
# three nodes' at most half of JetStream R3's; the table ends with those
# ratios.
#
# Each run starts fresh servers on a temporary directory, warms them for
# 2 s, then pushes 1 KiB JSON for DUR and reads the CPU time the server
# processes spent (utime + stime from /proc/<pid>/stat, summed over the
# servers) over the measured run. The rows:
#
#   queen 1 node     one node; `queen bench`, batches of 100 on 32 connections
#   queen 3 nodes    three nodes, one group, with a cluster secret
#                    (bench/lib.sh), the same load pushed to the leader;
#                    the CPU of all three
#   js R1 default    one nats-server (bench/jetstream, run in-process by
#                    `jsbench serve`) with NATS's default sync (fsync every
#                    2 min); `jsbench load`: 32 publishers, 100 in flight
#                    each (BATCH), an R1 stream
#   js R1 always     the same with `sync_interval: always` (fsync before
#                    every acknowledgement: queen's durability)
#   js R3 always     three servers, `sync_interval: always`, an R3 stream,
#                    publishers connected to the stream leader; the CPU of
#                    all three
#
# The driver is the first build's `queen bench` for every queen run, so
# only the server changes; jsbench load runs in a process of its own, so its
# CPU is not counted. Rounds alternate the order of the runs (forwards,
# backwards, ...) so that drift in a shared machine falls on all of them
# alike; it prints each run, then each row's medians and the ratios.
#
#   bench/cpu.sh /tmp/queen                               # every row, 2 rounds of 20 s: about 5 minutes
#   bench/cpu.sh /tmp/queen-main /tmp/queen               # every row for two builds
#   NODES=1 JETSTREAM=0 bench/cpu.sh A B                  # one node only, as cpu.sh was before
#   ROUNDS=3 DUR=20s PROFILE=/tmp/prof bench/cpu.sh A B   # and a CPU profile of each queen node's run
#   RATE=40000 bench/cpu.sh A B                           # paced: the same load on every row
#   MESSAGES=1000000 DUR=60s bench/cpu.sh A B             # the same number of messages for every row
#   BATCH=1 SIZE=256 RATE=4000 bench/cpu.sh A B           # single small messages (the warm-up stays 100 x 1 KiB)
#
# NODES ("1 3") chooses the queen rows; JETSTREAM=0 leaves out the
# JetStream rows, JS_SYNC ("default always") chooses the R1 ones (R3 runs
# with always only). BATCH sets JetStream's publishes in flight per
# publisher, so that both systems have 32 x BATCH messages in flight.
#
# Unpaced runs say what a build reaches; but on a shared machine the rate
# moves with the other load, and the CPU per message moves with the rate (a
# slower node commits smaller groups). RATE=R paces the measured run to R
# msgs/s (queen bench --rate, jsbench load --rate), below what every row
# reaches, so that each row's CPU per message is measured at the same load.
# MESSAGES=N ends each measured run after N pushed messages (DUR still
# bounds it): Pebble's compactions rewrite more per message the larger the
# store, so a build that pushes more in a fixed time also pays more per
# message; a fixed count gives every build the same store to compact.
#
# PROFILE=DIR starts each queen node with --pprof and keeps a CPU profile of
# the measured run in DIR (build-round.pprof for one node,
# build-3n-nI-round.pprof for three); pprof's sampling costs a node about 1%
# more CPU, alike for every build (JetStream runs are not profiled). The
# profile lasts DUR, and the CPU is then read when it ends: with MESSAGES,
# both include the flushes and compactions the run left behind until DUR.
#
# Pop+ack is not measured here: jsbench's popack run fills its stream in the
# same process before it measures, so the server CPU of the fill and of the
# pops cannot be told apart from outside (bench/compare.sh has the rates).
#
# Needs go (to build bench/jetstream, whose modules come from the module
# proxy), curl and python3. Uses ports 20632-20652 (queen HTTP, JetStream
# clients), 20732-20752 (Raft, JetStream routes) and 20832-20852 (pprof) on
# 127.0.0.1, and a temporary directory. Linux only.
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: bench/cpu.sh QUEEN_BINARY..." >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DUR=${DUR:-20s}
ROUNDS=${ROUNDS:-2}
PROFILE=${PROFILE:-}
RATE=${RATE:-}
MESSAGES=${MESSAGES:-}
BATCH=${BATCH:-100}
SIZE=${SIZE:-1024}
NODES=${NODES:-1 3}
JETSTREAM=${JETSTREAM:-1}
JS_SYNC=${JS_SYNC:-default always}
for n in $NODES; do
	case $n in 1 | 3) ;; *) echo "cpu.sh: NODES=$NODES: want 1, 3 or both" >&2; exit 2 ;; esac
done
for s in $JS_SYNC; do
	case $s in default | always) ;; *) echo "cpu.sh: JS_SYNC=$JS_SYNC: want default, always or both" >&2; exit 2 ;; esac
done
W=$(mktemp -d /tmp/queen-cpu.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT
DRIVER=$1
TICK=$(getconf CLK_TCK)
secs=${DUR%s}
[ -n "$PROFILE" ] && mkdir -p "$PROFILE"
HTTP_BASE=20622 RAFT_BASE=20722 PPROF_BASE=20822
echo "the cluster secret of a cpu.sh run" >"$W/secret"
SECRET=$W/secret
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
if [ "$JETSTREAM" != 0 ]; then
	(cd "$ROOT/bench/jetstream" && go build -o "$W/jsbench" .)
fi

# ticks PID...: the CPU the processes have spent, in clock ticks.
ticks() {
	local p t=0
	for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
	echo $t
}

# record ROW ROUND TICKS: appends the run in $W/report.json (queen bench's
# or jsbench's) to $W/results, and shows it.
record() {
	python3 - "$1" "$2" "$3" "$TICK" "$W/report.json" "$(cut -d' ' -f1 /proc/loadavg)" >>"$W/results" <<'EOF'
import json, sys
row, rnd, ticks, tick, path, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
r = json.load(open(path))
push = r["ops"]["push"]
pushed = r.get("pushed", push.get("messages"))
errors = r.get("errors", 0)
if isinstance(errors, dict):
    errors = sum(errors.values())
print(json.dumps({"row": row, "round": rnd, "pushed": pushed, "rate": push["msgs_per_s"], "p99_ms": push["latency_ms"]["p99"],
                  "us_per_msg": ticks / tick * 1e6 / pushed, "errors": errors, "load": load}))
EOF
	tail -1 "$W/results" >&2
}

# settle lets the kernel write back what the run wrote before the next one.
settle() {
	sync
	sleep 2
}

# push URL: the measured push on queen at URL.
push() {
	local url=$1
	"$DRIVER" bench --url "$url" --batch "$BATCH" --size "$SIZE" --conns 32 --duration "$DUR" ${RATE:+--rate "$RATE"} \
		${MESSAGES:+--messages "$MESSAGES"} --queue load --json >"$W/report.json"
}

# warm URL: 2 s of the standard load on queen at URL.
warm() {
	"$DRIVER" bench --url "$1" --batch 100 --size 1024 --conns 32 --duration 2s --queue warm --json >/dev/null
}

# run1 BINARY ROUND: one measured run on a fresh node.
run1() {
	local bin=$1 round=$2 name url=http://127.0.0.1:$((HTTP_BASE + 10)) pprof=127.0.0.1:$((PPROF_BASE + 10))
	name=$(basename "$bin")
	rm -rf "$W/data"
	"$bin" serve --data "$W/data" --http "${url#http://}" ${PROFILE:+--pprof "$pprof"} --log-level warn 2>>"$W/node.log" &
	local pid=$!
	until curl -s "$url/health" 2>/dev/null | grep -q '"role":"leader"'; do sleep 0.2; done
	warm "$url"
	local prof=""
	if [ -n "$PROFILE" ]; then
		curl -s -o "$PROFILE/$name-$round.pprof" "http://$pprof/debug/pprof/profile?seconds=$secs" &
		prof=$!
	fi
	local before after
	before=$(ticks "$pid")
	push "$url"
	[ -n "$prof" ] && wait "$prof"
	after=$(ticks "$pid")
	record "$name 1 node" "$round" $((after - before))
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -rf "$W/data"
	settle
}

# run3 BINARY ROUND: one measured run on a fresh three-node cluster
# (lib.sh's start1, await_leader and stop3), pushing to the leader.
run3() {
	local Q=$1 round=$2 name i pids=() profs=()
	name=$(basename "$Q")
	rm -rf "$W/n1" "$W/n2" "$W/n3"
	for i in 1 2 3; do
		start1 $i ${PROFILE:+--pprof 127.0.0.1:$((PPROF_BASE + 10 * i))}
		pids+=("$(cat "$W/n$i.pid")")
	done
	await_leader
	warm "$leader"
	if [ -n "$PROFILE" ]; then
		for i in 1 2 3; do
			curl -s -o "$PROFILE/$name-3n-n$i-$round.pprof" "http://127.0.0.1:$((PPROF_BASE + 10 * i))/debug/pprof/profile?seconds=$secs" &
			profs+=("$!")
		done
	fi
	local before after
	before=$(ticks "${pids[@]}")
	push "$leader"
	[ ${#profs[@]} -gt 0 ] && wait "${profs[@]}"
	after=$(ticks "${pids[@]}")
	record "$name 3 nodes" "$round" $((after - before))
	stop3
}

# runjs N SYNC ROUND: one measured run on N fresh JetStream servers (1: one
# server and an R1 stream; 3: a cluster and an R3 stream).
runjs() {
	local n=$1 sync=$2 round=$3 i pids=() routes="" urls=""
	rm -rf "$W/js"
	for i in $(seq 1 "$n"); do
		routes+="${routes:+,}nats://127.0.0.1:$((RAFT_BASE + 10 * i))"
		urls+="${urls:+,}nats://127.0.0.1:$((HTTP_BASE + 10 * i))"
	done
	for i in $(seq 1 "$n"); do
		if [ "$n" = 1 ]; then
			"$W/jsbench" serve --name n1 --port $((HTTP_BASE + 10)) --dir "$W/js/n1" --sync "$sync" 2>>"$W/js.log" &
		else
			"$W/jsbench" serve --name "n$i" --port $((HTTP_BASE + 10 * i)) --cluster-port $((RAFT_BASE + 10 * i)) \
				--routes "$routes" --dir "$W/js/n$i" --sync "$sync" 2>>"$W/js.log" &
		fi
		pids+=("$!")
	done
	local load=("$W/jsbench" load --url "$urls" --replicas "$n" --conns 32 --inflight "$BATCH" --leader)
	# Warm up, until the server (or the cluster's meta leader) takes the stream.
	local waited=0
	until "${load[@]}" --size 1024 --duration 2s >/dev/null 2>>"$W/js.log"; do
		sleep 1
		waited=$((waited + 1))
		if [ $waited -gt 60 ]; then
			echo "cpu.sh: JetStream R$n did not take the stream" >&2
			tail -5 "$W/js.log" >&2
			exit 1
		fi
	done
	local before after
	before=$(ticks "${pids[@]}")
	"${load[@]}" --size "$SIZE" --duration "$DUR" ${RATE:+--rate "$RATE"} ${MESSAGES:+--messages "$MESSAGES"} >"$W/report.json" 2>>"$W/js.log"
	after=$(ticks "${pids[@]}")
	record "js R$n $sync" "$round" $((after - before))
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	rm -rf "$W/js"
	settle
}

# One round's runs: each build's one node, then JetStream R1, then each
# build's three nodes, then JetStream R3, so that the pairs the goal
# compares run close together.
runs=()
for n in $NODES; do
	for b in "$@"; do runs+=("run$n $b"); done
	if [ "$JETSTREAM" != 0 ]; then
		if [ "$n" = 1 ]; then
			for s in $JS_SYNC; do runs+=("runjs 1 $s"); done
		else
			runs+=("runjs 3 always")
		fi
	fi
done

for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then order=("${runs[@]}"); else order=(); for ((i = ${#runs[@]} - 1; i >= 0; i--)); do order+=("${runs[i]}"); done; fi
	for run in "${order[@]}"; do
		# shellcheck disable=SC2086 # the run's words: function and arguments
		$run "$r"
	done
done

python3 - "$W/results" "$(basename "$1")" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'row':24} {'round':>5} {'msgs/s':>9} {'p99 ms':>7} {'µs CPU/msg':>10} {'errors':>6} {'load':>5}")
for r in rows:
    print(f"{r['row']:24} {r['round']:>5} {r['rate']:9.0f} {r['p99_ms']:7.1f} {r['us_per_msg']:10.2f} {r['errors']:>6} {r['load']:>5}")
print("medians:")
med = {}
for name in dict.fromkeys(r["row"] for r in rows):
    mine = [r for r in rows if r["row"] == name]
    med[name] = statistics.median(r["us_per_msg"] for r in mine)
    print(f"{name:24} {'':>5} {statistics.median(r['rate'] for r in mine):9.0f} {statistics.median(r['p99_ms'] for r in mine):7.1f} "
          f"{med[name]:10.2f}")
goals = [(" 1 node", "js R1 default", 1.0), (" 1 node", "js R1 always", 1.0), (" 3 nodes", "js R3 always", 0.5)]
lines = []
for suffix, js, goal in goals:
    if js not in med:
        continue
    for name in med:
        if name.endswith(suffix):
            ratio = med[name] / med[js]
            lines.append(f"{name + ' / ' + js:40} {ratio:6.2f}  (goal <= {goal:.1f}: {'met' if ratio <= goal else 'not met'})")
if lines:
    print("CPU per message, ratios of the medians:")
    print("\n".join(lines))
EOF
