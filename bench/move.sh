#!/usr/bin/env bash
# move.sh: what moving a queue between Raft groups costs the pushes to it
# (issue 30, "Measured": a move's time and the pushes' p99 during it).
#
# Each round starts three fresh nodes with --groups 3 and a cluster secret
# (lib.sh), configures queue `hot` in group 1, fills it with BACKLOG
# messages of 1 KiB (`queen bench`, batches of 100), then pushes to it at a
# fixed offered rate (RATE msgs/s in batches of 10, through all three
# URLs) in three `queen bench` windows back to back:
#
#   before  QUIET (10 s)
#   during  started just before POST /api/v1/system/queues/hot/move
#           {"group":2}, stopped (SIGTERM: the run ends, the requests in
#           flight are answered and counted) as soon as the POST answers
#   after   QUIET (10 s)
#
# `queen bench` reports a whole run only, hence three runs rather than one
# split by time. Its latency counts from sending a request: a push held by
# the frozen queue keeps its connection, and the requests paced for that
# time leave late (all 32 connections wait, not 2,000 msgs/s' worth), so
# the during window's p99 is the wait of the pushes caught by the freeze,
# not the lateness a client with a schedule would see.
#
# Then it checks that nothing was lost or doubled: the queue's message count
# (GET /api/v1/status/queues/hot) equals the backlog plus every message the
# three windows had answered queued, and a pop + ack of the whole queue
# (`queen bench --workload popack`) acks exactly that many. It prints one
# table: per round the move's time (the POST's, seen by curl), the queue's
# messages when the move began and the bytes and chunks it copied, and per
# window the push rate, p50/p99/max, the p99 over the before window's of the
# same round (x before: the figure to quote, bench/README.md) and errors.
#
#   bench/move.sh                        # 2 rounds, about 2 minutes
#   ROUNDS=3 BACKLOG=100000 RATE=4000 bench/move.sh
#
# LOGS=info keeps the nodes' Info lines in $W/n1.log..n3.log (with W=DIR
# to keep them): the move's, one a phase, say where its time went.
#
# Needs go, curl and python3. Uses ports 18632-18652 (HTTP) and 18732-18752
# (Raft) on 127.0.0.1, apart from the other scripts' (it refuses to start if
# one is busy), and a temporary directory (W=DIR keeps it).
# Not part of make test.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
ROUNDS=${ROUNDS:-2}
BACKLOG=${BACKLOG:-50000}
RATE=${RATE:-2000}
QUIET=${QUIET:-10s}
KEEP=${W:+1}
W=${W:-$(mktemp -d /tmp/queen-move.XXXXXX)}
mkdir -p "$W"
HTTP_BASE=18622 RAFT_BASE=18722
# shellcheck source=lib.sh
. "$HERE/lib.sh"
trap 'for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done; wait 2>/dev/null || true; [ -n "$KEEP" ] || rm -rf "$W"' EXIT

# The six ports must be free: a cluster of another run met here would take
# this one's load, and break both.
for p in $((HTTP_BASE + 10)) $((HTTP_BASE + 20)) $((HTTP_BASE + 30)) $((RAFT_BASE + 10)) $((RAFT_BASE + 20)) $((RAFT_BASE + 30)); do
	if ! python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1) # as Go listens: a last run TIME_WAIT is no obstacle
s.bind(("127.0.0.1", int(sys.argv[1])))' "$p" 2>/dev/null; then
		echo "move.sh: port $p on 127.0.0.1 is busy (another run?)" >&2
		exit 1
	fi
done

echo "building into $W" >&2
(cd "$ROOT" && go build -o "$W/queen" ./cmd/queen)
Q=$W/queen
SECRET=$W/secret
echo "the cluster secret of a move.sh run" >"$SECRET"
RES=$W/results.jsonl
: >"$RES"

# settled: every node answers healthy, every node names the same leader
# for each group, and the three data groups have three different leaders.
# A node hands a group's leadership to its wanted member (cluster.Host's
# WantedLeader: placement.Leaders, since groups have R voters) some seconds
# after start (spreadLoop); a window it fell in would count the
# handover's refusals (503 no_leader) against the move. waitSettled asks
# for it ten times in a row, half a second apart, so a spread that is
# still moving is not taken for the end of one.
settled() {
	python3 - "$URLS3" <<'EOF'
import json, sys, urllib.request
seen = None
for u in sys.argv[1].split(","):
    try:
        h = json.load(urllib.request.urlopen(u + "/health", timeout=2))
    except Exception:
        sys.exit(1)
    groups = h.get("groups", [])
    leaders = {g["group"]: g.get("leader") for g in groups}
    if h.get("status") != "healthy" or len(groups) < 4 or "" in leaders.values() or None in leaders.values():
        sys.exit(1)
    if seen is not None and leaders != seen:
        sys.exit(1)
    seen = leaders
if len({seen[g] for g in seen if g != 0}) != 3:
    sys.exit(1)
EOF
}

# waitSettled waits until settled holds ten times in a row (at most 120 s).
waitSettled() {
	local ok=0 waited=0
	while [ $ok -lt 10 ]; do
		if settled; then ok=$((ok + 1)); else ok=0; fi
		sleep 0.5
		waited=$((waited + 1))
		if [ $waited -gt 240 ]; then
			echo "move.sh: the cluster did not settle" >&2
			tail -n 5 "$W"/n*.log >&2
			exit 1
		fi
	done
}

# total: the queue's message count, as any node answers it (linearizable).
total() {
	curl -sf "$leader/api/v1/status/queues/hot" | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["total"])'
}

# window NAME ARGS...: one paced push run on hot, its report in $W/NAME.json.
window() {
	local name=$1
	shift
	"$Q" bench --url "$URLS3" --queue hot --batch 10 --size 1024 --rate "$RATE" --json "$@" >"$W/$name.json"
}

round() {
	local r=$1
	echo "== round $r: three nodes, --groups 3" >&2
	start3 --groups 3 ${LOGS:+--log-level "$LOGS"}
	waitSettled
	curl -sf -X POST "$leader/api/v1/configure" -H 'Content-Type: application/json' \
		-d '{"queue":"hot","raftGroup":1}' >"$W/configure.json"
	echo "== round $r: backlog of $BACKLOG" >&2
	"$Q" bench --url "$URLS3" --queue hot --batch 100 --size 1024 --messages "$BACKLOG" --json >"$W/backlog.json"
	waitSettled

	echo "== round $r: before ($QUIET at $RATE msgs/s)" >&2
	window before --duration "$QUIET"

	local queued
	queued=$(total)
	echo "== round $r: during the move of hot to group 2 ($queued messages)" >&2
	# Not through window: a backgrounded function is a subshell, and the
	# SIGTERM must reach queen bench itself.
	"$Q" bench --url "$URLS3" --queue hot --batch 10 --size 1024 --rate "$RATE" --json --duration 120s >"$W/during.json" &
	local bpid=$!
	local code
	code=$(curl -s -o "$W/move.json" -w '%{http_code} %{time_total}' -X POST "$leader/api/v1/system/queues/hot/move" \
		-H 'Content-Type: application/json' -d '{"group":2}')
	kill -TERM "$bpid"
	wait "$bpid"
	echo "move: $code $(cat "$W/move.json")" >&2

	echo "== round $r: after ($QUIET)" >&2
	window after --duration "$QUIET"

	local count
	count=$(total)
	curl -sf "$leader/api/v1/system/placement" >"$W/placement.json"
	echo "== round $r: pop + ack of everything" >&2
	"$Q" bench --url "$URLS3" --queue hot --workload popack --batch 100 --idle 2s --duration 120s --json >"$W/popack.json"

	python3 - "$r" "$code" "$queued" "$count" "$W" >>"$RES" <<'EOF'
import json, sys
r, code, queued, count, w = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
load = lambda n: json.load(open(f"{w}/{n}.json"))
backlog = load("backlog")["pushed"]
move = load("move") if code[0] == "200" else {}
placement = load("placement")
hot = [q for q in placement["queues"] if q["queue"] == "hot"]
leaders = {g["id"]: g["leader"] for g in placement["groups"]}
windows = {}
for n in ("before", "during", "after"):
    rep = load(n)
    lat = rep["ops"].get("push", {}).get("latency_ms", {})
    windows[n] = {"seconds": rep["seconds"], "pushed": rep["pushed"], "rate": rep["pushed"] / rep["seconds"] if rep["seconds"] else 0,
                  "p50": lat.get("p50"), "p99": lat.get("p99"), "max": lat.get("max"), "errors": rep.get("errors") or {}}
pop = load("popack")
print(json.dumps({"round": int(r), "move_status": int(code[0]), "move_s": float(code[1]), "move": move,
                  "placement": hot[0] if hot else None, "leaders": leaders, "queued_before_move": queued, "backlog": backlog,
                  "count_after": count, "acked": pop["acked"], "popped": pop["popped"],
                  "pop_errors": pop.get("errors") or {}, "windows": windows}))
EOF
	stop3
}

for r in $(seq 1 "$ROUNDS"); do
	round "$r"
done

python3 - "$RES" "$RATE" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rate = sys.argv[2]
ok = True
print(f"offered {rate} msgs/s in pushes of 10 x 1 KiB over three URLs; hot moved from group 1 to group 2")
print(f"{'round':>5} {'move s':>7} {'msgs in hot':>11} {'MB copied':>9} {'chunks':>6}  {'window':6} {'secs':>6} {'msgs/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'x before':>8}  errors")
for x in rows:
    m = x["move"]
    head = f"{x['round']:>5} {x['move_s']:7.2f} {x['queued_before_move']:11d} {m.get('bytes', 0) / 1e6:9.1f} {m.get('chunks', 0):6d}"
    for i, n in enumerate(("before", "during", "after")):
        v = x["windows"][n]
        errs = ", ".join(f"{k} {c}" for k, c in sorted(v["errors"].items())) or "none"
        f = lambda a: f"{a:7.1f}" if a is not None else f"{'-':>7}"
        b = x["windows"]["before"]["p99"]
        ratio = f"{v['p99'] / b:8.1f}" if v["p99"] is not None and b else f"{'-':>8}"
        print(f"{head if i == 0 else '':{len(head)}}  {n:6} {v['seconds']:6.2f} {v['rate']:7.0f} {f(v['p50'])} {f(v['p99'])} {f(v['max'])} {ratio}  {errs}")
print()
for x in rows:
    pushed = sum(v["pushed"] for v in x["windows"].values())
    want = x["backlog"] + pushed
    good = x["move_status"] == 200 and x["count_after"] == want and x["acked"] == want and x["popped"] == want \
        and x["placement"] and x["placement"]["group"] == 2
    ok = ok and good
    print(f"round {x['round']}: move {x['move_status']}, hot in group {x['placement'] and x['placement']['group']} "
          f"(epoch {x['placement'] and x['placement']['epoch']}; leaders after: group 1 {x['leaders'].get('1') or x['leaders'].get(1)}, "
          f"group 2 {x['leaders'].get('2') or x['leaders'].get(2)}); backlog {x['backlog']} + pushed {pushed} = {want}; "
          f"in the queue {x['count_after']}, popped {x['popped']}, acked {x['acked']}"
          f"{'' if not x['pop_errors'] else ' (pop errors ' + json.dumps(x['pop_errors']) + ')'}: {'ok' if good else 'MISMATCH'}")
sys.exit(0 if ok else 1)
EOF
