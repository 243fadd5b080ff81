#!/usr/bin/env bash
# compare.sh: the issue-6 speed table in one session. Every broker figure is
# divided by the ceiling (the perf kit's ceiling, $PERF/ceiling) measured minutes earlier by
# the same tool, on the same machine. See bench/README.md.
#
#   bench/compare.sh                 # about 8 minutes
#   JETSTREAM=0 bench/compare.sh     # without the NATS JetStream runs
#   RESTART=1 bench/compare.sh       # plus the restart-vs-history runs (about 3 more minutes)
#   MEMORY=1 bench/compare.sh        # plus resident memory per idle partition (about 1 minute)
#   SPEED=0 RESTART=1 bench/compare.sh   # only the restart runs (SPEED=0 skips the throughput table)
#
# Needs go, curl and python3 (for the summary); the JetStream runs fetch
# nats-server and nats.go from the module proxy (bench/jetstream is its own
# module). Uses ports 16632-16652, 17632-17652, 18091-18092, 14222-14224
# and 16222-16224 on 127.0.0.1, and a temporary directory.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PERF=${PERF:-$ROOT/../shared/perf}
DUR=${DUR:-8s}
W=$(mktemp -d /tmp/queen-compare.XXXXXX)
OUT=$W/results.jsonl
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT

echo "building into $W" >&2
(cd "$ROOT" && go build -o "$W/queen" ./cmd/queen)
(cd "$PERF/ceiling" && go build -o "$W/ceiling" .)
(cd "$PERF/loadgen" && go build -o "$W/loadgen" .)
Q=$W/queen
U=http://127.0.0.1:16632

wait_http() { until curl -sf "$1/health" >/dev/null 2>&1; do sleep 0.1; done; }
settle() { sync; sleep 2; }
# record LABEL TOOL ARGS...: runs one measurement and appends {"label":…,"tool":…,"report":…}.
record() {
	local label=$1 tool=$2
	shift 2
	echo "== $label" >&2
	local line
	case $tool in
	loadgen) line=$("$W/loadgen" "$@" | tail -1) ;;
	jetstream) line=$("$W/jsbench" "$@" 2>>"$W/js.log") ;;
	*) line=$("$Q" bench "$@" --json 2>/dev/null) ;;
	esac
	printf '{"label":"%s","tool":"%s","report":%s}\n' "$label" "$tool" "$line" >>"$OUT"
}

# 1. The ceiling, single node and three Raft nodes, by both tools. It runs
# again at the end: the machines drift, and ratios use the higher reading.
# ceiling_start MODE PORT starts a fresh ceiling; ceiling_stop ends it and
# removes its data.
ceiling_start() {
	"$W/ceiling" -mode $1 -addr 127.0.0.1:$2 -dir "$W/ceiling-data" -life 60s >>"$W/ceiling-$1.log" 2>&1 &
	cpid=$!
	sleep 2
}
ceiling_stop() {
	kill $cpid 2>/dev/null || true
	wait $cpid 2>/dev/null || true
	rm -rf "$W/ceiling-data" 2>/dev/null || true
	settle
}
ceiling_runs() {
	for mode in single raft3; do
		port=18091
		[ $mode = raft3 ] && port=18092
		ceiling_start $mode $port
		record "ceiling $mode" loadgen -url http://127.0.0.1:$port -mode push -conns 32 -batch 100 -size 1024 -duration $DUR -queue q
		record "ceiling $mode" queen --url http://127.0.0.1:$port --conns 32 --batch 100 --size 1024 --duration $DUR --queue q
		ceiling_stop
		# The tail at 20k msgs/s on a fresh ceiling, warmed at that pace as
		# the broker's own-cluster run is: the floor this machine puts under
		# a synced (and, for raft3, replicated) push's p99.
		ceiling_start $mode $port
		"$Q" bench --url http://127.0.0.1:$port --batch 100 --rate 20000 --duration 5s --queue warm --json >/dev/null 2>&1 || true
		record "paced ceiling $mode" queen --url http://127.0.0.1:$port --batch 100 --rate 20000 --duration 15s --queue r20k
		ceiling_stop
	done
}
if [ "${SPEED:-1}" != 0 ]; then
ceiling_runs

# 2. One node.
U=http://127.0.0.1:16632
"$Q" serve --data "$W/single" --http 127.0.0.1:16632 --log-level warn 2>"$W/single.log" &
spid=$!
wait_http $U
record "1 node push b100" queen --url $U --batch 100 --duration $DUR --queue s100
record "1 node push b100" loadgen -url $U -mode push -conns 32 -batch 100 -size 1024 -duration $DUR -queue lg100
record "1 node push b10" queen --url $U --batch 10 --duration $DUR --queue s10
record "1 node push b1" queen --url $U --batch 1 --duration $DUR --queue s1
record "1 node pop+ack b100" queen --url $U --workload popack --batch 100 --duration $DUR --queue s100
record "1 node push b100 (again)" queen --url $U --batch 100 --duration $DUR --queue s100b
record "1 node pop+ack b100 c16" queen --url $U --workload popack --conns 16 --batch 100 --duration $DUR --queue s100b
record "1 node push 20k/s (warm)" queen --url $U --batch 100 --rate 20000 --duration 15s --queue r20k
record "1 node mixed" queen --url $U --workload mixed --batch 100 --duration $DUR --queue smix
record "1 node push 1 partition" queen --url $U --batch 100 --partitions 1 --duration $DUR --queue p1
record "1 node push 10000 partitions" queen --url $U --batch 100 --partitions 10000 --duration $DUR --queue p10k
peak=$(python3 -c "import json,sys
for l in open('$OUT'):
    r=json.loads(l)
    if r['label']=='1 node push b100 (again)': print(int(r['report']['ops']['push']['msgs_per_s']/2))")
record "1 node push b100 at half peak" queen --url $U --batch 100 --rate "$peak" --duration 15s --queue half
kill $spid
wait $spid 2>/dev/null || true
settle

# 3. Three nodes on loopback, with the cluster secret a deployment has (a
# follower then prepares the pushes it receives: ARCHITECTURE.md,
# "Forwarding"). Pushes to all three URLs run on a cluster of their own:
# a second run on a store the first one filled is 15-20% slower (Pebble's
# compactions catch up), which would count against whichever ran second.
echo "the cluster secret of a compare.sh run" >"$W/secret"
SECRET=$W/secret
. "$ROOT/bench/lib.sh"
start3
record "3 nodes push b100 (all URLs)" queen --url $URLS3 --batch 100 --duration $DUR --queue c100all
stop3
# The same spread over three Raft groups, one led by each node (issue 16):
# six queues, so that every group has two. Its leaders settle a few
# seconds after the start; the warm-up push waits that out.
start3 --groups 3
sleep 12
"$Q" bench --url $URLS3 --batch 100 --queues 6 --duration 2s --queue warm --json >/dev/null 2>&1 || true
record "3 nodes push b100 (all URLs, 3 groups)" queen --url $URLS3 --batch 100 --queues 6 --duration $DUR --queue g3all
stop3
start3
record "3 nodes push b100 (leader)" queen --url $leader --batch 100 --duration $DUR --queue c100
record "3 nodes pop+ack b100" queen --url $leader --workload popack --batch 100 --duration $DUR --queue c100
record "3 nodes push b100 (leader, again)" queen --url $leader --batch 100 --duration $DUR --queue c100b
record "3 nodes pop+ack b100 c16" queen --url $leader --workload popack --conns 16 --batch 100 --duration $DUR --queue c100b
record "3 nodes push 20k/s (warm)" queen --url $leader --batch 100 --rate 20000 --duration 15s --queue c20k
stop3
# The paced run again on a cluster of its own, warmed at the same pace: the
# one above follows 40 s of unpaced pushes and pop+acks, whose flushes and
# compactions the nodes are still catching up on (this machine's kernel
# spends 1.7-3.5 ms of CPU on each MB written).
start3
"$Q" bench --url $leader --batch 100 --rate 20000 --duration 5s --queue warm20k --json >/dev/null 2>&1 || true
record "3 nodes push 20k/s (warm, own cluster)" queen --url $leader --batch 100 --rate 20000 --duration 15s --queue f20k
stop3
# A second fresh reading of each side of "all URLs / leader", the other
# way round: a fresh cluster's first push here reads 60-78k msgs/s from
# one run to the next whatever it is sent to, so that ratio takes each
# side's higher reading, as the ceiling's do.
start3
record "3 nodes push b100 (leader, fresh 2)" queen --url $leader --batch 100 --duration $DUR --queue c100f
stop3
start3
record "3 nodes push b100 (all URLs, fresh 2)" queen --url $URLS3 --batch 100 --duration $DUR --queue c100all2
stop3

# 3b. NATS JetStream 2.15.3 on the same machine (JETSTREAM=0 skips it):
# 32 publishers with 100 publishes in flight each, 1 KiB JSON, as queen
# bench's 32 connections of 100-message pushes. sync_interval: always is
# durability parity (acknowledged after an fsync on a quorum); "default"
# is NATS's out-of-the-box setting, which acknowledges before any fsync.
if [ "${JETSTREAM:-1}" != 0 ]; then
	(cd "$ROOT/bench/jetstream" && go build -o "$W/jsbench" .)
	J=$W/jsbench
	routes=nats://127.0.0.1:16222,nats://127.0.0.1:16223,nats://127.0.0.1:16224
	for sync in always default; do
		"$J" serve --name n1 --port 14222 --dir "$W/js1-$sync" --sync $sync 2>>"$W/js.log" &
		jpid=$!
		sleep 2
		record "jetstream R1 push (sync $sync)" jetstream load --url nats://127.0.0.1:14222 --replicas 1 --duration $DUR
		[ $sync = default ] && record "jetstream R1 pop+ack b100" jetstream load --url nats://127.0.0.1:14222 --replicas 1 --workload popack --fill 400000 --duration $DUR
		kill $jpid
		wait $jpid 2>/dev/null || true
		settle
	done
	for i in 1 2 3; do
		"$J" serve --name n$i --port $((14221 + i)) --cluster-port $((16221 + i)) --routes $routes --dir "$W/js3-$i" 2>>"$W/js.log" &
	done
	sleep 5
	record "jetstream R3 push (sync always)" jetstream load --url nats://127.0.0.1:14222 --replicas 3 --duration $DUR
	for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done
	wait 2>/dev/null || true
	settle
fi

fi

# 4. Restart time against history length (RESTART=1): push for 5 s or 60 s
# (ten times the messages), kill -9, restart (crash recovery: replays the
# unflushed memtables and the log since the last snapshot), then two clean
# restarts (SIGTERM). Each is timed from `queen serve` to the first
# successful push.
if [ -n "${RESTART:-}" ]; then
	for hist in 5 60; do
		d=$W/r$hist
		"$Q" serve --data "$d" --http 127.0.0.1:16632 --log-level warn 2>>"$W/restart.log" &
		rpid=$!
		wait_http $U
		record "history ${hist}s" queen --url $U --batch 100 --duration ${hist}s --queue hist
		sig=KILL
		for kind in crash clean clean; do
			kill -$sig $rpid
			wait $rpid 2>/dev/null || true
			# The kernel's write-back of what the last run wrote is not
			# part of a restart (and would grow with the history).
			sync
			s=$(date +%s%N)
			"$Q" serve --data "$d" --http 127.0.0.1:16632 --log-level info 2>>"$W/restart.log" &
			rpid=$!
			until curl -sf -XPOST -H 'content-type: application/json' -d '{"items":[{"queue":"probe","payload":{"a":1}}]}' $U/api/v1/push >/dev/null 2>&1; do sleep 0.01; done
			e=$(date +%s%N)
			printf '{"label":"%s restart, history %ss","tool":"restart","report":{"seconds":%s}}\n' "$kind" "$hist" "$(((e - s) / 1000000))e-3" >>"$OUT"
			sig=TERM
		done
		kill $rpid
		wait $rpid 2>/dev/null || true
		grep -o 'msg="node opened".*' "$W/restart.log" >&2 || true
		: >"$W/restart.log"
		rm -rf "$d"
		settle
	done
fi

# 5. Memory (MEMORY=1): resident size of a restarted, idle node holding
# 1,000 partitions and then 101,000, one message each (the difference over
# 100,000 is the cost of an idle partition), then after two consumer groups
# acked 40,000 of those messages (about 40,000 cursors).
rss_after_restart() { # DATA: restart on DATA, wait, print VmRSS in bytes
	"$Q" serve --data "$1" --http 127.0.0.1:16632 --log-level warn 2>>"$W/memory.log" &
	mpid=$!
	wait_http $U
	sleep 3
	echo $(($(awk '/^VmRSS/ {print $2}' /proc/$mpid/status) * 1024))
	kill $mpid
	wait $mpid 2>/dev/null || true
}
if [ -n "${MEMORY:-}" ]; then
	d=$W/mem
	fill() { # PARTITIONS QUEUE
		"$Q" serve --data "$d" --http 127.0.0.1:16632 --log-level warn 2>>"$W/memory.log" &
		mpid=$!
		wait_http $U
		"$Q" bench --url $U --batch 1 --partitions "$1" --messages "$1" --queue "$2" --json >/dev/null 2>&1
		kill $mpid
		wait $mpid 2>/dev/null || true
	}
	fill 1000 m1
	r1=$(rss_after_restart "$d")
	fill 100000 m2
	r2=$(rss_after_restart "$d")
	# Two consumer groups drain m2: 40,000 cursor rows.
	"$Q" serve --data "$d" --http 127.0.0.1:16632 --log-level warn 2>>"$W/memory.log" &
	mpid=$!
	wait_http $U
	"$Q" bench --url $U --workload popack --queue m2 --groups 2 --batch 100 --messages 40000 --duration 120s --idle 2s --json >/dev/null 2>&1
	kill $mpid
	wait $mpid 2>/dev/null || true
	r3=$(rss_after_restart "$d")
	printf '{"label":"memory","tool":"memory","report":{"rss_1k":%s,"rss_101k":%s,"rss_cursors":%s}}\n' "$r1" "$r2" "$r3" >>"$OUT"
	rm -rf "$d"
fi

[ "${SPEED:-1}" = 0 ] || ceiling_runs

python3 - "$OUT" <<'EOF'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
def rate(r):
    ops = r["report"].get("ops")
    if ops is None:  # loadgen
        return r["report"]["msgs_per_s"]
    op = "ack" if "pop+ack" in r["label"] else "push"
    return ops.get(op, {}).get("msgs_per_s", 0)
ceil, seen = {}, {}
for r in rows:
    if r["label"].startswith("ceiling"):
        k = (r["label"].split()[1], r["tool"])
        seen.setdefault(k, []).append(rate(r))
        ceil[k] = max(seen[k])
if seen:
    print("ceiling (this run, first and last reading; ratios use the higher):")
for (m, t), v in sorted(seen.items()):
    print(f"  {m:6} by {t:7} " + " / ".join(f"{x:.0f}" for x in v) + " msgs/s")
if ceil:
    print(f"{'run':42} {'tool':9} {'msgs/s':>8} {'x single':>9} {'x raft3':>8} {'p50 ms':>8} {'p99 ms':>8}")
restarts = {}
for r in rows:
    if r["label"].startswith(("ceiling", "paced ceiling", "history")):
        continue
    if r["tool"] == "memory":
        m = r["report"]
        print(f"memory: RSS {m['rss_1k'] / 2**20:.1f} MiB with 1,000 idle partitions, {m['rss_101k'] / 2**20:.1f} MiB with 101,000: "
              f"{(m['rss_101k'] - m['rss_1k']) / 100000:.0f} B per idle partition; {m['rss_cursors'] / 2**20:.1f} MiB once two "
              f"consumer groups have acked 40,000 of their messages (about 40,000 cursors)")
        continue
    if r["tool"] == "restart":
        restarts.setdefault(r["label"], []).append(r["report"]["seconds"])
        continue
    v = rate(r)
    s, t = ceil.get(("single", r["tool"])), ceil.get(("raft3", r["tool"]))
    lat = {"p50": r["report"].get("p50_ms", 0), "p99": r["report"].get("p99_ms", 0)}
    ops = r["report"].get("ops")
    if ops:
        op = "ack" if "pop+ack" in r["label"] else "push"
        lat = ops.get(op, {}).get("latency_ms", {})
    extra = ""
    if r["label"] == "1 node mixed" and ops:
        extra = f"  (pop+ack x single {ops.get('ack', {}).get('msgs_per_s', 0) / s:.2f})"
    print(f"{r['label']:42} {r['tool']:9} {v:8.0f} {v / s if s else 0:9.2f} {v / t if t else 0:8.2f} {lat.get('p50', 0):8.1f} {lat.get('p99', 0):8.1f}{extra}")
def get(label):
    for r in rows:
        if r["label"] == label:
            return r
def msgs(label):
    r = get(label)
    return rate(r) if r else None
def lat(label, q):
    r = get(label)
    if not r:
        return None
    op = "ack" if "pop+ack" in label else "push"
    return r["report"]["ops"].get(op, {}).get("latency_ms", {}).get(q)
def ratio(a, b):
    return a / b if a and b else None
# The ceiling's tail at 20k msgs/s: the lower of its two readings.
def ceiling_lat(mode, q):
    v = [r["report"]["ops"]["push"]["latency_ms"][q] for r in rows if r["label"] == f"paced ceiling {mode}"]
    return min(v) if v else None
raft3 = ceil.get(("raft3", "queen"))
one = max(filter(None, [msgs("1 node push b100"), msgs("1 node push b100 (again)")]), default=None)
three = max(filter(None, [msgs("3 nodes push b100 (leader)"), msgs("3 nodes push b100 (leader, again)"),
                          msgs("3 nodes push b100 (leader, fresh 2)")]), default=None)
def higher(*labels):
    return max(filter(None, map(msgs, labels)), default=None)
targets = [
    ("3 nodes push / raft3 ceiling", ratio(three, raft3), ">=", 0.8),
    ("3 nodes push / 1 node push", ratio(three, one), ">=", 0.6),
    ("3 nodes push all URLs / leader (fresh, higher of 2)", ratio(higher("3 nodes push b100 (all URLs)", "3 nodes push b100 (all URLs, fresh 2)"),
                                                           higher("3 nodes push b100 (leader)", "3 nodes push b100 (leader, fresh 2)")), ">=", 0.9),
    ("3 nodes push all URLs / leader (first of each)", ratio(msgs("3 nodes push b100 (all URLs)"), msgs("3 nodes push b100 (leader)")), "", None),
    ("3 nodes all URLs: 3 groups / 1 group", ratio(msgs("3 nodes push b100 (all URLs, 3 groups)"), msgs("3 nodes push b100 (all URLs)")), "", None),
    ("1 node pop+ack c32 / push", ratio(msgs("1 node pop+ack b100"), msgs("1 node push b100")), ">=", 1.0),
    ("1 node pop+ack c16 / push", ratio(msgs("1 node pop+ack b100 c16"), msgs("1 node push b100 (again)")), ">=", 1.0),
    ("3 nodes pop+ack c32 / push", ratio(msgs("3 nodes pop+ack b100"), msgs("3 nodes push b100 (leader)")), ">=", 1.0),
    ("3 nodes pop+ack c16 / push", ratio(msgs("3 nodes pop+ack b100 c16"), msgs("3 nodes push b100 (leader, again)")), ">=", 1.0),
    ("1 node p99 ms at 20k/s", lat("1 node push 20k/s (warm)", "p99"), "<", 10),
    ("3 nodes p99 ms at 20k/s (own cluster)", lat("3 nodes push 20k/s (warm, own cluster)", "p99"), "<", 25),
    ("3 nodes p99 ms at 20k/s (after bulk runs)", lat("3 nodes push 20k/s (warm)", "p99"), "<", 25),
    ("1 node p99 at 20k/s / ceiling single's", ratio(lat("1 node push 20k/s (warm)", "p99"), ceiling_lat("single", "p99")), "", None),
    ("3 nodes p99 at 20k/s (own cluster) / ceiling raft3's", ratio(lat("3 nodes push 20k/s (warm, own cluster)", "p99"), ceiling_lat("raft3", "p99")), "", None),
    ("3 nodes push / JetStream R3 sync always", ratio(three, msgs("jetstream R3 push (sync always)")), ">=", 2.0),
    ("1 node push / JetStream R1 sync always", ratio(one, msgs("jetstream R1 push (sync always)")), "", None),
    ("1 node push / JetStream R1 default", ratio(one, msgs("jetstream R1 push (sync default)")), "", None),
    ("1 node pop+ack / JetStream R1 pop+ack", ratio(msgs("1 node pop+ack b100"), msgs("jetstream R1 pop+ack b100")), "", None),
]
print("issue 14 targets (this run):")
for name, v, op, goal in targets:
    if v is None:
        print(f"  {name:52} {'-':>8}  (not measured)")
        continue
    mark = ""
    if goal is not None:
        ok = v >= goal if op == ">=" else v < goal
        mark = f"goal {op} {goal}: {'met' if ok else 'NOT met'}"
    print(f"  {name:52} {v:8.2f}  {mark}")
for label in ("1 node push 20k/s (warm)", "3 nodes push 20k/s (warm)", "3 nodes push 20k/s (warm, own cluster)"):
    if get(label):
        print(f"  {label:52} p50 {lat(label, 'p50'):.1f} p99 {lat(label, 'p99'):.1f} p99.9 {lat(label, 'p99.9'):.1f} ms, "
              f"{msgs(label):.0f} msgs/s")
for mode in ("single", "raft3"):
    if ceiling_lat(mode, "p99") is not None:
        print(f"  {'ceiling ' + mode + ' 20k/s (fresh, lower of 2)':52} p50 {ceiling_lat(mode, 'p50'):.1f} p99 {ceiling_lat(mode, 'p99'):.1f} "
              f"p99.9 {ceiling_lat(mode, 'p99.9'):.1f} ms")
if restarts:
    for kind in ("crash", "clean"):
        base = statistics.median(restarts.get(f"{kind} restart, history 5s", [1]))
        for hist in ("5s", "60s"):
            v = restarts.get(f"{kind} restart, history {hist}")
            if v:
                m = statistics.median(v)
                print(f"{kind} restart, history {hist:4}: {m:.2f} s (median of {len(v)}; x history 5s: {m / base:.2f})")
EOF
