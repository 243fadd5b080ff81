#!/usr/bin/env bash
# ab.sh: did a change slow the three-node push path, or a pop through a
# follower (pop+ack of 100,000 messages pushed through the leader first)? Builds queen at OLD
# (a commit) and at NEW (default: the working tree), then runs compare.sh's
# three-node push rows on each, interleaved (old, new, new, old, ...) so that
# a machine drifting under other load counts against both alike, and prints
# each row's median per build and new/old.
#
#   bench/ab.sh d997cb6             # about 4 minutes with ROUNDS=2
#   ROUNDS=3 DUR=10s bench/ab.sh d997cb6 main
#   ONLY=pop bench/ab.sh d997cb6    # the rows whose label matches the regex
#
# Needs go, git, curl and python3. Ports as lib.sh; do not run beside
# compare.sh or reads.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=${1:?usage: bench/ab.sh OLD_COMMIT [NEW_COMMIT]}
NEW=${2:-}
DUR=${DUR:-8s}
ROUNDS=${ROUNDS:-2}
W=$(mktemp -d /tmp/queen-ab.XXXXXX)
OUT=$W/results.jsonl
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; git -C "$ROOT" worktree remove --force "$W/src-old" 2>/dev/null; git -C "$ROOT" worktree remove --force "$W/src-new" 2>/dev/null; rm -rf "$W"' EXIT

# build NAME REF: queen at REF (empty: the working tree) into $W/NAME.
build() {
	echo "building $1 (${2:-working tree}) into $W" >&2
	if [ -z "$2" ]; then
		(cd "$ROOT" && go build -o "$W/$1" ./cmd/queen)
	else
		git -C "$ROOT" worktree add -q --detach "$W/src-$1" "$2"
		(cd "$W/src-$1" && go build -o "$W/$1" ./cmd/queen)
	fi
}
build old "$OLD"
build new "$NEW"
echo "an ab.sh cluster secret" >"$W/secret"
SECRET=$W/secret
. "$ROOT/bench/lib.sh"

# row BUILD LABEL START_ARGS -- BENCH_ARGS: one measurement on a fresh
# cluster; LEADER in BENCH_ARGS becomes the leader's URL.
row() {
	local build=$1 label=$2 line
	shift 2
	[[ "$label" =~ ${ONLY:-.} ]] || return 0
	local start=()
	while [ "$1" != -- ]; do start+=("$1"); shift; done
	shift
	Q=$W/$build
	start3 "${start[@]}"
	echo "== $build: $label" >&2
	[ "$label" = "push b100 (all URLs, 3 groups)" ] && "$Q" bench --url $URLS3 --queues 6 --duration 2s --queue warm --json >/dev/null 2>&1
	# What a pop through a follower drains is pushed through the leader first.
	[ "$label" = "pop+ack b100 (a follower)" ] && "$Q" bench --url "$leader" --batch 100 --messages 100000 --duration 60s --queue pf --json >/dev/null 2>&1
	local args=("${@/#LEADER/$leader}")
	args=("${args[@]/#FOLLOWER/$follower}")
	line=$("$Q" bench "${args[@]}" --duration "$DUR" --json 2>/dev/null)
	printf '{"build":"%s","label":"%s","report":%s}\n' "$build" "$label" "$line" >>"$OUT"
	stop3
}
rows() { # rows BUILD
	row "$1" "push b100 (leader)" -- --url LEADER --batch 100 --queue c100
	row "$1" "push b100 (all URLs)" -- --url $URLS3 --batch 100 --queue c100all
	row "$1" "push b100 (all URLs, 3 groups)" --groups 3 -- --url $URLS3 --batch 100 --queues 6 --queue g3all
	row "$1" "pop+ack b100 (a follower)" -- --url FOLLOWER --workload popack --batch 100 --queue pf
}
for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then rows old; rows new; else rows new; rows old; fi
done

python3 - "$OUT" "$OLD" "${NEW:-working tree}" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    ops = r["report"]["ops"]
    op = ops.get("push") or ops["ack"]
    runs.setdefault(r["label"], {}).setdefault(r["build"], []).append((op["msgs_per_s"], op["latency_ms"]["p99"]))
print(f"old = {sys.argv[2]}, new = {sys.argv[3]}; medians of {len(next(iter(runs.values()))['old'])} runs each")
print(f"{'3 nodes':34} {'old msgs/s':>10} {'new msgs/s':>10} {'new/old':>8} {'old p99':>8} {'new p99':>8}")
for label, b in runs.items():
    o = statistics.median(x[0] for x in b["old"]); n = statistics.median(x[0] for x in b["new"])
    op = statistics.median(x[1] for x in b["old"]); np_ = statistics.median(x[1] for x in b["new"])
    print(f"{label:34} {o:>10.0f} {n:>10.0f} {n/o:>8.2f} {op:>8.1f} {np_:>8.1f}")
EOF
