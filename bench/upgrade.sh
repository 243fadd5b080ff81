#!/usr/bin/env bash
# upgrade.sh OLD_COMMIT: a rolling upgrade under load, checked.
#
# Builds queen at OLD_COMMIT (git archive into a temporary directory) and at
# the working tree, starts three OLD nodes with a cluster secret (lib.sh),
# runs a bounded push and pop load (upgrade_load.py) and, under it, replaces
# the nodes one at a time: the leader hands its leadership over first
# (queen step-down; a binary older than that route is stopped as leader),
# then the node is stopped (SIGTERM) and the NEW binary
# started on the same data directory; the next waits until it has caught
# up. Then the load drains and the script checks:
#
#   - acked == delivered: every acknowledged push was popped and acked
#     exactly once (upgrade_load.py);
#   - every node reached the same applied index and, stopped, `queen check`
#     finds each store consistent with the same digest;
#   - queen status shows three NEW nodes and the cluster version.
#
# NGROUPS=G (above 1) runs the nodes with --groups G --replicas 3: the
# directory and every data group are upgraded under the load, and each
# group's applied index and digest are compared (an old commit must know
# --groups and --replicas); the load goes to 2·G queues (QUEUES).
#
# It exits non-zero on any mismatch. Needs go, git, curl and python3. Ports
# 15632-15652 (HTTP) and 15732-15752 (Raft) on 127.0.0.1, apart from the
# other scripts' (a bench meeting this cluster would load it, and break
# both runs).
# `make upgrade-test` runs it (minutes: not part of make test). W=DIR keeps
# the work directory (logs, load.json); by default it is a temporary one,
# removed on success.
set -euo pipefail

OLD=${1:?usage: upgrade.sh OLD_COMMIT}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
KEEP=${W:+1}
W=${W:-$(mktemp -d /tmp/queen-upgrade.XXXXXX)}
mkdir -p "$W"
HTTP_BASE=15622 RAFT_BASE=15722
# shellcheck source=lib.sh
. "$HERE/lib.sh"
LOAD_MAX=${LOAD_MAX:-1000000} # messages: the load's bound
LOAD_RATE=${LOAD_RATE:-1000} # pushed messages a second, at most
SETTLE=${SETTLE:-5}          # seconds of load between replacements
t0=$(date +%s)

fail() {
	echo "upgrade.sh: FAIL: $*" >&2
	echo "upgrade.sh: logs in $W" >&2
	for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done
	exit 1
}
trap 'for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done' EXIT

echo "== build $OLD and the working tree"
oldrev=$(git -C "$ROOT" rev-parse --short "$OLD")
mkdir -p "$W/old-src"
git -C "$ROOT" archive "$OLD" | tar -x -C "$W/old-src"
(cd "$W/old-src" && go build -o "$W/queen-old" ./cmd/queen)
(cd "$ROOT" && go build -o "$W/queen-new" ./cmd/queen)

SECRET=$W/secret
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$SECRET"
ARGS=(--retention-interval 0) # no sweeps: the nodes' applied indexes settle
NGROUPS=${NGROUPS:-1} # not GROUPS: bash keeps that name for itself
if [ "$NGROUPS" -gt 1 ]; then
	ARGS+=(--groups "$NGROUPS" --replicas 3)
	export QUEUES=${QUEUES:-$((2 * NGROUPS))} # upgrade_load.py: load in every group
fi

health() { curl -s --max-time 2 "http://127.0.0.1:$((HTTP_BASE + 10 * $1))/health" || true; }
field() { python3 -c "import json,sys
try: print(json.load(sys.stdin).get('$1',''))
except Exception: print('')"; }
# applied_all: the applied index of the node's group, or with groups of the
# directory and then each data group, space-separated.
applied_all() { python3 -c "import json,sys
try:
    h = json.load(sys.stdin)
    print(' '.join(str(x) for x in [h.get('applied', '')] + [g.get('applied', '') for g in h.get('groups', [])]))
except Exception: print('')"; }

for u in ${URLS3//,/ }; do
	! curl -s --max-time 1 "$u/health" >/dev/null || fail "something answers at $u already"
done
echo "== start three nodes at $oldrev"
Q=$W/queen-old
rm -rf "$W/n1" "$W/n2" "$W/n3"
for i in 1 2 3; do start1 "$i" "${ARGS[@]}"; done
await_leader
echo "leader $leader"

echo "== load"
rm -f "$W/stop"
python3 "$HERE/upgrade_load.py" "$URLS3" "$W/load.json" "$W/stop" "$LOAD_MAX" "$LOAD_RATE" >"$W/load.out" 2>&1 &
loadpid=$!
sleep "$SETTLE"

Q=$W/queen-new
for i in 1 2 3; do
	url=http://127.0.0.1:$((HTTP_BASE + 10 * i))
	if [ "$(health "$i" | field role)" = leader ]; then
		echo "== n$i leads: step down"
		if ! "$W/queen-new" step-down --url "$url" 2>"$W/stepdown.err"; then
			# A binary from before the leadership route (404): the stop
			# below costs an election instead.
			grep -q no_such_route "$W/stepdown.err" || fail "step-down of n$i: $(cat "$W/stepdown.err")"
			echo "n$i has no step-down route: stopping it as leader (an election follows)"
		fi
		for _ in $(seq 100); do
			[ "$(health "$i" | field role)" != leader ] && break
			sleep 0.1
		done
	fi
	echo "== replace n$i"
	pid=$(cat "$W/n$i.pid")
	kill -TERM "$pid"
	wait "$pid" || fail "n$i (old) did not stop cleanly"
	start1 "$i" "${ARGS[@]}"
	# Caught up: healthy, and applied as far as the others were when it
	# came back.
	until [ "$(health "$i" | field status)" = healthy ]; do
		kill -0 "$(cat "$W/n$i.pid")" 2>/dev/null || fail "n$i (new) exited"
		sleep 0.2
	done
	target=0
	for j in 1 2 3; do
		a=$(health "$j" | field applied)
		[ -n "$a" ] && [ "$a" -gt "$target" ] && target=$a
	done
	until a=$(health "$i" | field applied) && [ -n "$a" ] && [ "$a" -ge "$target" ]; do sleep 0.2; done
	echo "n$i: new binary, caught up at $a"
	sleep "$SETTLE"
done

echo "== drain"
touch "$W/stop"
if ! wait "$loadpid"; then
	cat "$W/load.out"
	fail "acked != delivered (see $W/load.json)"
fi
cat "$W/load.out"

echo "== status"
"$W/queen-new" status --url "$URLS3" | tee "$W/status.txt"
# Any version: it rises to the new binary's once every node runs it
# (raft/command/version.go), within a read interval of the last restart.
grep -Eq '^cluster version [0-9]+ ' "$W/status.txt" || fail "no cluster version in queen status"

echo "== applied indexes and digests"
same=0
for _ in $(seq 300); do
	a1=$(health 1 | applied_all) a2=$(health 2 | applied_all) a3=$(health 3 | applied_all)
	if [ -n "$a1" ] && [ "$a1" = "$a2" ] && [ "$a2" = "$a3" ]; then
		same=$((same + 1))
		[ $same -ge 3 ] && break
	else
		same=0
	fi
	sleep 0.2
done
[ $same -ge 3 ] || fail "applied indexes differ: $a1 $a2 $a3"
for i in 1 2 3; do
	pid=$(cat "$W/n$i.pid")
	kill -TERM "$pid"
	wait "$pid" || fail "n$i did not stop cleanly"
done
for i in 1 2 3; do
	"$W/queen-new" check --data "$W/n$i" >"$W/check$i.txt" || fail "queen check n$i: $(cat "$W/check$i.txt")"
	echo "n$i: $(cat "$W/check$i.txt")"
done
cmp -s "$W/check1.txt" "$W/check2.txt" && cmp -s "$W/check2.txt" "$W/check3.txt" || fail "the nodes' digests differ"

echo "upgrade.sh: OK: $oldrev -> working tree under load in $(($(date +%s) - t0)) s"
trap - EXIT
[ -n "$KEEP" ] || rm -rf "$W"
