#!/usr/bin/env bash
# follower.sh: what a write costs through a follower against its leader
# (issue 41). Behind a load balancer most requests land on a follower, which
# relays the write to the leader. Three nodes on loopback with a cluster
# secret, on one group and on --groups 3 (each node a voter of every group:
# a queue's group has a leader and two followers). `queen bench` pushes one
# message per request, at a light pace (RATE requests/s on one connection),
# through the leader of the queue's group and through one of its followers,
# in turn (leader, follower, follower, leader, ...) so that a machine
# drifting under other load counts against both alike. With BASE (a commit)
# the same runs on queen built at BASE, interleaved with the working tree's
# build cluster by cluster, so that before and after are measured in one
# sitting. It prints p50 and p90 of each (median over the rounds), and the
# follower's p50 minus the leader's.
#
# With --groups it runs the first push to a new queue too ("new queues"):
# each request pushes to a queue no one has pushed to, which the node places
# first with a directory command (group 0), through the directory's leader
# and through one of its followers; the follower's reply waits until its
# own directory replica has applied the placement, which it routes by.
#
# It runs a write then a stale read through the same node too ("read after
# write"): a push of one message to fq, then GET of that message with
# ?consistency=stale, paced as above, and reports the read's latency. On a
# follower the read waits until its replica has applied the push it relayed
# (read-your-writes, docs/api.md §1.6).
#
#   bench/follower.sh                 # about 4 minutes
#   bench/follower.sh 24eafe5         # before (24eafe5) and after, about 8 minutes
#   RATE=20 DUR=10s ROUNDS=3 bench/follower.sh
#
# Needs go, git, curl and python3. Uses ports 15632-15652 and 15732-15752 on
# 127.0.0.1 and a temporary directory. The base is built from `git archive`
# (no worktree is added).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=${1:-}
DUR=${DUR:-8s}
RATE=${RATE:-20}
ROUNDS=${ROUNDS:-2}
W=$(mktemp -d /tmp/queen-follower.XXXXXX)
OUT=$W/results.jsonl
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT

echo "building into $W" >&2
(cd "$ROOT" && go build -o "$W/new" ./cmd/queen)
builds=new
if [ -n "$BASE" ]; then
	mkdir -p "$W/src-base"
	git -C "$ROOT" archive "$BASE" | tar -x -C "$W/src-base"
	(cd "$W/src-base" && go build -o "$W/base" ./cmd/queen)
	builds="base new"
fi
echo "the cluster secret of a follower.sh run" >"$W/secret"
SECRET=$W/secret
HTTP_BASE=15622
RAFT_BASE=15722
. "$ROOT/bench/lib.sh"

# roles [GROUP]: sets lead and fol to the base URLs of the leader of queue
# fq's group (of GROUP when given: 0 is the directory) and of one of its
# followers, as placement says; false while the group has no leader.
roles() {
	local r
	r=$(curl -sf "$leader/api/v1/system/placement" | python3 -c '
import json, sys
p = json.load(sys.stdin)
g = int(sys.argv[1]) if sys.argv[1:] else next((q["group"] for q in p.get("queues") or [] if q["queue"] == "fq"), 1)
lid = next((x.get("leader") for x in p.get("groups") or [] if x["id"] == g), "")
http = {n["id"]: n["http"] for n in p["nodes"]}
if not lid or lid not in http: sys.exit(1)
f = sorted(i for i in http if i != lid)[0]
u = lambda a: a if a.startswith("http") else "http://" + a
print(u(http[lid]), u(http[f]))
' "$@") || return 1
	lead=${r% *}
	fol=${r#* }
}

# push_run BUILD GROUPS VIA URL: one paced run of single-message pushes.
push_run() {
	local line
	echo "== $1 groups=$2 through the $3" >&2
	line=$("$W/new" bench --url "$4" --queue fq --batch 1 --conns 1 --rate "$RATE" --size 256 --duration "$DUR" --json)
	printf '{"build":"%s","groups":%s,"via":"%s","kind":"fq","report":%s}\n' "$1" "$2" "$3" "$line" >>"$OUT"
}

# new_run BUILD GROUPS VIA URL: one paced run of single-message pushes,
# each the first to a queue of its own (DUR's worth at RATE; NEW_SEQ keeps
# the names of every run apart).
new_run() {
	local line n
	n=$(python3 -c "import sys; print(int(float(sys.argv[1].rstrip('s')) * float(sys.argv[2])))" "$DUR" "$RATE")
	NEW_SEQ=$((NEW_SEQ + 1))
	echo "== $1 groups=$2 new queues through the directory's $3" >&2
	line=$("$W/new" bench --url "$4" --queue "nq$NEW_SEQ" --queues "$n" --messages "$n" --batch 1 --conns 1 --rate "$RATE" --size 256 --duration "$DUR" --json)
	printf '{"build":"%s","groups":%s,"via":"%s","kind":"new","report":%s}\n' "$1" "$2" "$3" "$line" >>"$OUT"
}
NEW_SEQ=0

# rw_run BUILD GROUPS VIA URL: DUR's worth at RATE of a push then a stale
# read of it through URL; the report is the reads' latency.
rw_run() {
	local line
	echo "== $1 groups=$2 read after write through the $3" >&2
	line=$(python3 - "$4" "$DUR" "$RATE" <<'PY'
import http.client, json, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
n = int(float(sys.argv[2].rstrip("s")) * float(sys.argv[3]))
gap = 1 / float(sys.argv[3])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
lat, errors, start = [], 0, time.monotonic()
for i in range(n):
    time.sleep(max(0, start + i * gap - time.monotonic()))
    txn = "rw-%d-%d" % (time.time_ns(), i)
    body = json.dumps({"items": [{"queue": "fq", "transactionId": txn, "payload": {"i": i}}]})
    c.request("POST", "/api/v1/push", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read()
    if r.status != 201:
        errors += 1
        continue
    part = json.loads(out)[0]["partition_id"]
    t = time.monotonic()
    c.request("GET", "/api/v1/messages/%s/%s?consistency=stale" % (part, txn))
    r = c.getresponse()
    got = r.read()
    d = (time.monotonic() - t) * 1000
    if r.status != 200 or txn.encode() not in got:
        errors += 1
    lat.append(d)
lat.sort()
q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] if lat else 0
print(json.dumps({"ops": {"push": {"latency_ms": {"p50": q(0.5), "p90": q(0.9)}}}, "errors": errors}))
PY
)
	printf '{"build":"%s","groups":%s,"via":"%s","kind":"rw","report":%s}\n' "$1" "$2" "$3" "$line" >>"$OUT"
}

# pairs RUN BUILD GROUPS [GROUP]: ROUNDS rounds of RUN (push_run, rw_run
# or new_run) through the leader of fq's group (of GROUP when given) and
# through one of its followers, in alternating order. The roles are read
# again before each round, and checked after it: with --groups a group's
# leader may still change once the cluster settled (the leaders spread, the
# balancer moves a queue), and a run through a node that no longer led
# would count as the leader's.
pairs() {
	local run=$1 b=$2 g=$3 r was
	shift 3
	for r in $(seq "$ROUNDS"); do
		until roles "$@"; do sleep 0.5; done
		was="$lead $fol"
		echo "   leader $lead, follower $fol" >&2
		if [ $((r % 2)) -eq 1 ]; then
			$run "$b" "$g" leader "$lead"
			$run "$b" "$g" follower "$fol"
		else
			$run "$b" "$g" follower "$fol"
			$run "$b" "$g" leader "$lead"
		fi
		if roles "$@" && [ "$lead $fol" != "$was" ]; then
			echo "   WARNING: the roles changed during the round (now leader $lead, follower $fol)" >&2
		fi
	done
}

# cluster BUILD GROUPS: a fresh cluster of BUILD, then ROUNDS rounds of
# leader and follower runs of each kind.
cluster() {
	local b=$1 g=$2
	Q=$W/$b
	if [ "$g" -gt 1 ]; then start3 --groups "$g"; else start3; fi
	"$W/new" bench --url "$leader" --queue fq --messages 10 --batch 1 --json >/dev/null 2>&1 || true
	sleep 5 # a grouped cluster hands each group to its preferred member first
	pairs push_run "$b" "$g"
	pairs rw_run "$b" "$g"
	if [ "$g" -gt 1 ]; then
		pairs new_run "$b" "$g" 0 # the directory's leader and a follower
	fi
	stop3
}

uptime >&2
for g in 1 3; do
	for b in $builds; do
		cluster "$b" "$g"
	done
done
uptime >&2

python3 - "$OUT" <<'EOF'
import json, sys, statistics
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    lat = r["report"]["ops"]["push"]["latency_ms"]
    rows.setdefault((r["groups"], r.get("kind", "fq"), r["build"], r["via"]), []).append((lat["p50"], lat["p90"], r["report"].get("errors")))
print(f"{'single-message pushes, ' + 'one conn':50} {'p50 ms':>8} {'p90 ms':>8}  {'follower p50 - leader p50':>26}  errors")
kinds = {"fq": 0, "rw": 1, "new": 2}
for (g, k, b, via) in sorted(rows, key=lambda k: (k[0], kinds[k[1]], k[2] != "base", k[3] != "leader")):
    v = rows[(g, k, b, via)]
    p50 = statistics.median(x[0] for x in v)
    p90 = statistics.median(x[1] for x in v)
    d = ""
    if via == "follower" and (g, k, b, "leader") in rows:
        lp50 = statistics.median(x[0] for x in rows[(g, k, b, "leader")])
        d = f"{p50 - lp50:+.2f} ms ({p50 / lp50:.2f}x)"
    errs = [x[2] for x in v if x[2]]
    label = {"fq": f"groups={g} {b}, through the {via}",
             "rw": f"groups={g} {b}, read after write, the {via}",
             "new": f"groups={g} {b}, new queues, the directory's {via}"}[k]
    print(f"{label:50} {p50:>8.2f} {p90:>8.2f}  {d:>26}  {errs or ''}")
EOF
