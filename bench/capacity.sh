#!/usr/bin/env bash
# capacity.sh: scale-out measured as capacity (issue 39). scaleout.sh shows
# how the work divides at a fixed load; this shows what the cluster carries
# when every node has the same small CPU share: each node runs in its own
# cgroup v1 cpu group (/sys/fs/cgroup/cpu/queen-cap-<i>), capped at CAP
# microseconds of CPU per PERIOD (default 12,000 of 100,000: 0.12 core,
# throttled for the rest of each 100 ms once used up), so two shared
# cores can stand in for N small machines. For each N in NS (default 3 6 9)
# a fresh cluster of N nodes with G = N groups and R = 3 (--balance=false,
# a cluster secret) is saturated with 1 KiB JSON pushes in batches of 50
# over 12 queues and 24 connections through every node's URL, unpaced, for
# DUR (in seconds, as 20s) with `queen bench`, which stays uncapped. The
# runs alternate (3 6 9 3 6 9 for ROUNDS = 2) so drift in the machine falls
# on every N. Per run it records msgs/s and the push p99, and per node the
# CPU seconds it used (utime + stime, /proc/<pid>/stat) as a share of its
# cap and the share of CFS periods in which its group was throttled
# (cpu.stat). It prints the table, then the ratios N6 / N3 and N9 / N3 round by round, and names the
# busiest node when it alone is at its cap (where the rest of the scaling
# goes). The machine's idle share over each run says whether the caps, not
# the machine, were the limit: with no idle CPU left and no node at its cap,
# the figures mean little.
#
#   sudo bench/capacity.sh                        # about 6 minutes
#   NS="3 9" ROUNDS=3 DUR=30s CAP=12000 bench/capacity.sh
#   QUEEN=/path/to/queen bench/capacity.sh        # a prebuilt binary
#   CAP=1200 PERIOD=10000 bench/capacity.sh       # the same share in 10 ms periods
#   OUT=runs.jsonl bench/capacity.sh              # and keep each run's figures
#   CONNS_PER_NODE=8 bench/capacity.sh            # offered concurrency grows with N
#                                                 # (default CONNS=24 whatever N)
#   SYSTEM=jetstream bench/capacity.sh            # NATS JetStream the same way (bench/jetstream):
#         each server capped alike, sync_interval always, 12 streams of 3
#         replicas, JS_CONNS (12) publishers over every server with
#         JS_INFLIGHT (100) publishes in flight each: as many messages in
#         flight as 24 connections of 50-message batches
#   PROFILE=/tmp/prof bench/capacity.sh           # and one more run at N = PROFILE_N
#         (default 9) with --pprof on every node: the busiest node's CPU
#         profile and its top functions are kept in /tmp/prof (NS="" for
#         the profiled run alone)
#
# Needs root (it makes cgroups), the cgroup v1 cpu controller mounted at
# /sys/fs/cgroup/cpu, python3, and go (unless QUEEN is given; PROFILE also
# uses `go tool pprof`). Uses ports 23632-23712 (HTTP), 23732-23812 (Raft)
# and 23832-23912 (pprof) on 127.0.0.1, a temporary directory (W=DIR keeps
# it, with the nodes' logs n1.log.. of every run, LOGS=info for more), and the
# cgroups queen-cap-1 .. queen-cap-<largest N>, which it removes on exit.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
	echo "capacity.sh: needs root to make cgroups; run it as root (sudo -E bench/capacity.sh)" >&2
	exit 2
fi
CG=/sys/fs/cgroup/cpu
if [ ! -w "$CG/cpu.cfs_quota_us" ]; then
	echo "capacity.sh: no cgroup v1 cpu controller at $CG; mount one (mount -t cgroup -o cpu cgroup $CG)," >&2
	echo "  or on a cgroup v2 machine cap each node with its cpu.max instead (this script knows v1 only)" >&2
	exit 2
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
NS=${NS-3 6 9}
ROUNDS=${ROUNDS:-2}
DUR=${DUR:-20s}
CAP=${CAP:-12000}
PERIOD=${PERIOD:-100000}
PROFILE=${PROFILE:-}
PROFILE_N=${PROFILE_N:-9}
HTTP_BASE=23622 RAFT_BASE=23722 PPROF_BASE=23822
MAXN=$(printf '%s\n' $NS ${PROFILE:+"$PROFILE_N"} | sort -n | tail -1)
KEEP=${W:+1}
W=${W:-$(mktemp -d /tmp/queen-capacity.XXXXXX)}
mkdir -p "$W"

cleanup() {
	local j i
	for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for i in $(seq 1 "$MAXN"); do
		[ -d "$CG/queen-cap-$i" ] && rmdir "$CG/queen-cap-$i" 2>/dev/null || true
	done
	[ -n "$KEEP" ] || rm -rf "$W"
}
trap cleanup EXIT

for i in $(seq 1 "$MAXN"); do
	mkdir -p "$CG/queen-cap-$i"
	echo "$PERIOD" >"$CG/queen-cap-$i/cpu.cfs_period_us"
	echo "$CAP" >"$CG/queen-cap-$i/cpu.cfs_quota_us"
done

SYSTEM=${SYSTEM:-queen}
Q=${QUEEN:-$W/queen}
[ -n "${QUEEN:-}" ] || (cd "$ROOT" && go build -o "$W/queen" ./cmd/queen)
if [ "$SYSTEM" = jetstream ]; then
	[ -z "$PROFILE" ] || { echo "capacity.sh: PROFILE is for queen" >&2; exit 2; }
	(cd "$ROOT/bench/jetstream" && go build -o "$W/jsbench" .)
elif [ "$SYSTEM" != queen ]; then
	echo "capacity.sh: SYSTEM=$SYSTEM: want queen or jetstream" >&2
	exit 2
fi
echo "the cluster secret of a capacity.sh run" >"$W/secret"
TICK=$(getconf CLK_TCK)

# usage N PIDS...: one line "wall_ns idle_ticks total_ticks steal_ticks"
# for the machine, then per node "cpu_ticks nr_periods nr_throttled".
usage() {
	local n=$1 i
	shift
	echo "$(date +%s%N) $(awk '/^cpu / {t = 0; for (f = 2; f <= NF; f++) t += $f; print $5 + $6, t, $9}' /proc/stat)"
	for i in $(seq 1 "$n"); do
		echo "$(awk '{print $14 + $15}' "/proc/$1/stat") $(awk '/^nr_periods/ {p = $2} /^nr_throttled/ {t = $2} END {print p, t}' "$CG/queen-cap-$i/cpu.stat")"
		shift
	done
}

# scrape N OUT: the sums over the nodes of the counters that say where
# per-batch work goes (one JSON object): the Raft entries the leaders
# proposed and the commands in them, the requests and commands a node sent
# on to a leader, the write and read syscalls, the GC's CPU.
scrape() {
	python3 - "$1" "$HTTP_BASE" >"$2" <<'EOF'
import json, re, sys, urllib.request
n, base = int(sys.argv[1]), int(sys.argv[2])
names = ["queen_raft_entries_total", "queen_raft_entry_commands_total", "queen_forwarded_requests_total",
         "process_io_write_syscalls_total", "process_io_read_syscalls_total",
         "go_gc_cpu_seconds_total"]
sums = dict.fromkeys(names, 0.0)
for i in range(1, n + 1):
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{base + 10 * i}/metrics/prometheus", timeout=5).read().decode()
    except Exception:
        continue
    for line in text.splitlines():
        m = re.match(r"([a-z_]+)(\{[^}]*\})? (\S+)$", line)
        if m and m.group(1) in sums:
            sums[m.group(1)] += float(m.group(3))
print(json.dumps(sums))
EOF
}

# settled N: every node answers the placement with all N data groups on
# three voters and a leader. spread N: and every node leads one of them,
# and the directory its preferred member, where the leader spreading
# (cluster/host.go, spreadLoop) puts them; under the caps that
# can come well after 12 s, and a handoff during a measured run answers
# some pushes 503 no_leader.
settled() {
	placed "$1" settled
}
spread() {
	placed "$1" spread
}
placed() {
	python3 - "$1" "$HTTP_BASE" "$2" <<'EOF'
import json, sys, urllib.request
n, base, want = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for i in range(1, n + 1):
    try:
        p = json.load(urllib.request.urlopen(f"http://127.0.0.1:{base + 10 * i}/api/v1/system/placement", timeout=2))
    except Exception:
        sys.exit(1)
    groups = [x for x in p.get("groups", []) if x["id"] > 0]
    if len(groups) != n or any(len(x["members"]) != 3 or not x.get("leader") for x in groups):
        sys.exit(1)
    if want == "spread" and len({x["leader"] for x in groups}) != n:
        sys.exit(1)
    directory = [x for x in p.get("groups", []) if x["id"] == 0]
    if want == "spread" and directory and directory[0].get("leader") != sorted(directory[0]["members"])[0]:
        sys.exit(1)  # the directory is handed to its preferred member too (cluster/host.go, preferred)
sys.exit(0)
EOF
}

# run N LABEL [prof]: one measured run on a fresh cluster of N nodes, G = N,
# each node in its capped cgroup; with "prof" every node serves pprof and
# a CPU profile of each is taken over the measured run.
run() {
	local n=$1 label=$2 prof=${3:-} pids=() peers="" urls="" i conns=${CONNS:-24}
	[ -z "${CONNS_PER_NODE:-}" ] || conns=$((CONNS_PER_NODE * n))
	rm -rf "$W"/data "$W"/prof-*
	for i in $(seq 1 "$n"); do
		peers+="${peers:+,}n$i@127.0.0.1:$((RAFT_BASE + 10 * i))"
		urls+="${urls:+,}http://127.0.0.1:$((HTTP_BASE + 10 * i))"
	done
	if [ "$SYSTEM" = jetstream ]; then
		runjs "$n" "$label"
		return
	fi
	for i in $(seq 1 "$n"); do
		# The subshell joins the cgroup, then becomes the node: capped from its first instruction.
		(
			echo "$BASHPID" >"$CG/queen-cap-$i/cgroup.procs"
			exec "$Q" serve --data "$W/data/n$i" --node-id n$i --http 127.0.0.1:$((HTTP_BASE + 10 * i)) --raft 127.0.0.1:$((RAFT_BASE + 10 * i)) \
				--peers "$peers" --groups "$n" --replicas 3 --balance=false --cluster-secret-file "$W/secret" --log-level "${LOGS:-warn}" \
				${prof:+--pprof 127.0.0.1:$((PPROF_BASE + 10 * i))} 2>>"$W/n$i.log"
		) &
		pids+=($!)
	done
	local waited=0
	until settled "$n"; do
		sleep 0.5
		waited=$((waited + 1))
		if [ $waited -gt 360 ]; then
			echo "$label: the cluster did not settle" >&2
			tail -5 "$W"/n*.log >&2
			exit 1
		fi
	done
	waited=0
	until spread "$n"; do
		sleep 1
		waited=$((waited + 1))
		if [ $waited -gt 90 ]; then
			echo "$label: the leaderships did not spread in 90 s; measuring anyway" >&2
			break
		fi
	done
	sleep 2
	# Warm up: the queues are placed and the connections open.
	"$Q" bench --url "$urls" --batch 50 --queues 12 --conns "$conns" --size 1024 --duration 5s --queue cap --json >/dev/null
	local curls=()
	if [ -n "$prof" ]; then
		for i in $(seq 1 "$n"); do
			curl -s -o "$W/prof-$i" "http://127.0.0.1:$((PPROF_BASE + 10 * i))/debug/pprof/profile?seconds=${DUR%s}" &
			curls+=($!)
		done
	fi
	scrape "$n" "$W/counters-before"
	usage "$n" "${pids[@]}" >"$W/before"
	for i in $(seq 1 "$n"); do stat -c %s "$W/n$i.log"; done >"$W/logsize"
	local TIMEFORMAT='%U %S'
	{ time "$Q" bench --url "$urls" --batch 50 --queues 12 --conns "$conns" --size 1024 --duration "$DUR" --queue cap --json >"$W/report.json"; } 2>"$W/gen"
	usage "$n" "${pids[@]}" >"$W/after"
	scrape "$n" "$W/counters-after"
	[ ${#curls[@]} = 0 ] || wait "${curls[@]}" || true
	record "$label" "$n" "$conns"
	if [ -n "$prof" ]; then
		local busiest
		busiest=$(tail -1 "$W/results" | python3 -c 'import json, sys; r = json.load(sys.stdin); print(1 + r["cpu"].index(max(r["cpu"])))')
		mkdir -p "$PROFILE"
		cp "$Q" "$PROFILE/queen"
		for i in $(seq 1 "$n"); do cp "$W/prof-$i" "$PROFILE/n$i.pprof" 2>/dev/null || true; done
		echo "n$busiest" >"$PROFILE/busiest"
	fi
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	sync
	sleep 2
}

# runjs N LABEL: run's measured run on N JetStream servers, each in its
# capped cgroup: 12 streams of 3 replicas (placed by JetStream), JS_CONNS
# publishers, the i-th connected to the i-th server in turn.
runjs() {
	local n=$1 label=$2 pids=() routes="" urls="" i conns=${JS_CONNS:-12}
	rm -rf "$W"/data
	for i in $(seq 1 "$n"); do
		routes+="${routes:+,}nats://127.0.0.1:$((RAFT_BASE + 10 * i))"
		urls+="${urls:+,}nats://127.0.0.1:$((HTTP_BASE + 10 * i))"
	done
	for i in $(seq 1 "$n"); do
		(
			echo "$BASHPID" >"$CG/queen-cap-$i/cgroup.procs"
			exec "$W/jsbench" serve --name n$i --port $((HTTP_BASE + 10 * i)) --cluster-port $((RAFT_BASE + 10 * i)) \
				--routes "$routes" --dir "$W/data/n$i" 2>>"$W/n$i.log"
		) &
		pids+=($!)
	done
	rm -f "$W/counters-before" "$W/counters-after"
	local load=("$W/jsbench" load --url "$urls" --replicas 3 --streams 12 --conns "$conns" --inflight "${JS_INFLIGHT:-100}" --size 1024)
	# Warm up, until the cluster has its meta leader and takes the streams.
	local waited=0
	until "${load[@]}" --duration 5s >/dev/null 2>>"$W/gen.err"; do
		sleep 1
		waited=$((waited + 1))
		if [ $waited -gt 120 ]; then
			echo "$label: the JetStream cluster did not take the streams" >&2
			tail -5 "$W/gen.err" "$W"/n*.log >&2
			exit 1
		fi
	done
	usage "$n" "${pids[@]}" >"$W/before"
	for i in $(seq 1 "$n"); do stat -c %s "$W/n$i.log"; done >"$W/logsize"
	local TIMEFORMAT='%U %S'
	{ time "${load[@]}" --duration "$DUR" >"$W/report.json"; } 2>"$W/gen"
	usage "$n" "${pids[@]}" >"$W/after"
	record "$label" "$n" "$conns"
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	sync
	sleep 2
}

# record LABEL N CONNS: the run's figures, from report.json, before, after
# and gen, as one line of results.
record() {
	python3 - "$1" "$2" "$TICK" "$CAP" "$PERIOD" "$W/report.json" "$W/before" "$W/after" "$W/gen" "$(cut -d' ' -f1-3 /proc/loadavg)" "$W" "$3" >>"$W/results" <<'EOF'
import collections, json, re, sys
label, n, tick, cap, period = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
r = json.load(open(sys.argv[6]))
b = [[int(x) for x in l.split()] for l in open(sys.argv[7])]
a = [[int(x) for x in l.split()] for l in open(sys.argv[8])]
gen = sum(float(x) for x in open(sys.argv[9]).read().split())
wall = (a[0][0] - b[0][0]) / 1e9
idle = (a[0][1] - b[0][1]) / max(1, a[0][2] - b[0][2])
steal = (a[0][3] - b[0][3]) / max(1, a[0][2] - b[0][2])
cpu = [(a[i][0] - b[i][0]) / tick for i in range(1, n + 1)]
share = [c / wall / (cap / period) for c in cpu]
throttled = [(a[i][2] - b[i][2]) / max(1, a[i][1] - b[i][1]) for i in range(1, n + 1)]
push = r["ops"]["push"]
errors = r.get("errors") or {}
if not isinstance(errors, dict):  # jsbench counts its failed publishes
    errors = {"publish": errors}
# The requests the nodes refused during the run, by code, from their logs.
failed = collections.Counter()
for i, size in enumerate(int(x) for x in open(sys.argv[11] + "/logsize")):
    with open(f"{sys.argv[11]}/n{i + 1}.log", errors="replace") as f:
        f.seek(size)
        for line in f:
            m = re.search(r'msg="request failed".* code=(\S+)', line)
            if m:
                failed[m.group(1)] += 1
# Where per-batch work goes (queen only): the counters' growth over the run.
counters = {}
try:
    cb, ca = json.load(open(sys.argv[11] + "/counters-before")), json.load(open(sys.argv[11] + "/counters-after"))
    counters = {k: ca[k] - cb.get(k, 0) for k in ca}
except (OSError, ValueError):
    pass
print(json.dumps({"counters": counters, "failed": dict(failed), "conns": int(sys.argv[12]), "label": label, "n": n, "rate": push["msgs_per_s"], "p99_ms": push["latency_ms"]["p99"],
                  "errors": errors, "pushed": r.get("pushed", push["messages"]), "wall": wall, "idle": idle, "steal": steal, "gen_cpu": gen,
                  "cpu": cpu, "share": share, "throttled": throttled, "load": sys.argv[10]}))
EOF
}

echo "$SYSTEM: load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); cap $CAP of $PERIOD us per node"
for k in $(seq 1 "$ROUNDS"); do
	for n in $NS; do
		run "$n" "N$n #$k"
	done
done
[ -z "$PROFILE" ] || run "$PROFILE_N" "N$PROFILE_N prof" prof
[ -z "${OUT:-}" ] || cp "$W/results" "$OUT"

python3 - "$W/results" "$NS" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ns = [int(x) for x in sys.argv[2].split()]
print(f"{'run':9} {'conns':>5} {'msgs/s':>7} {'p99 ms':>7} {'errors':>6} {'us/msg':>6} {'busiest':>8} {'% cap':>6} {'least % cap':>11} "
      f"{'mean % cap':>10} {'thr %':>6} {'gen CPU s':>9} {'idle %':>6} {'steal %':>7}  load")
for r in rows:
    s = r["share"]
    top = s.index(max(s))
    print(f"{r['label']:9} {r['conns']:5d} {r['rate']:7.0f} {r['p99_ms'] or 0:7.1f} {sum(r['errors'].values()):6d} "
          f"{1e6 * sum(r['cpu']) / max(1, r['pushed']):6.1f} {'n' + str(top + 1):>8} "
          f"{100 * s[top]:6.0f} {100 * min(s):11.0f} {100 * sum(s) / len(s):10.0f} {100 * r['throttled'][top]:6.0f} "
          f"{r['gen_cpu']:9.1f} {100 * r['idle']:6.0f} {100 * r['steal']:7.1f}  {r['load']}")
print("(us/msg: the nodes' CPU summed, per message pushed; % cap: a node's CPU seconds over the run against")
print(" its cap; thr %: the share of CFS periods in which the busiest node was throttled; idle %, steal %: the")
print(" machine's idle CPU and the CPU its hypervisor took, over the run)")
for r in rows:
    c, pushed = r.get("counters"), max(1, r["pushed"])
    if c and c.get("queen_raft_entries_total"):
        entries = c["queen_raft_entries_total"]
        print(f"{r['label']}: {pushed / entries:.0f} messages and {c['queen_raft_entry_commands_total'] / entries:.1f} commands per Raft entry; "
              f"{100 * c['queen_forwarded_requests_total'] / (pushed / 50):.0f}% of the pushes sent on to a leader; "
              f"per 1,000 messages {1000 * c['process_io_write_syscalls_total'] / pushed:.0f} write and "
              f"{1000 * c['process_io_read_syscalls_total'] / pushed:.0f} read syscalls, {1e6 * c['go_gc_cpu_seconds_total'] / pushed:.1f} us GC")
for r in rows:
    if r["errors"]:
        print(f"{r['label']}: errors " + ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items())) +
              "; the nodes logged " + (", ".join(f"{k} {v}" for k, v in sorted(r["failed"].items())) or "nothing"))
measured = [r for r in rows if not r["label"].endswith("prof")]
rounds = {}
for r in measured:
    rounds.setdefault(r["label"].split("#")[1], {})[r["n"]] = r
for m in ns[1:]:
    base = ns[0]
    ratios = [rd[m]["rate"] / rd[base]["rate"] for rd in rounds.values() if m in rd and base in rd]
    if ratios:
        print(f"N{m} / N{base}: " + ", ".join(f"{x:.2f}" for x in ratios) + f" (mean {sum(ratios) / len(ratios):.2f})")
for r in measured:
    s = sorted(r["share"], reverse=True)
    if len(s) > 1 and s[0] >= 0.9 and s[1] < 0.8:
        print(f"{r['label']}: only the busiest node is at its cap ({100 * s[0]:.0f}%, next {100 * s[1]:.0f}%): the rest of the scaling goes there")
for r in measured:
    if r["idle"] < 0.05 and max(r["share"]) < 0.9:
        print(f"{r['label']}: no node at its cap and {100 * r['idle']:.0f}% of the machine idle: the machine was the limit, not the caps")
EOF

if [ -n "$PROFILE" ]; then
	b=$(cat "$PROFILE/busiest")
	echo "busiest node at N = $PROFILE_N: $b; its CPU profile is $PROFILE/$b.pprof (all nodes' beside it)"
	go tool pprof -top -nodecount 10 "$PROFILE/queen" "$PROFILE/$b.pprof" 2>/dev/null | tee "$PROFILE/top.txt"
	go tool pprof -top -cum -nodecount 30 "$PROFILE/queen" "$PROFILE/$b.pprof" 2>/dev/null >"$PROFILE/top-cum.txt" || true
fi
