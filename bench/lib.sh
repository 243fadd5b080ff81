# lib.sh: the three-node cluster that compare.sh, reads.sh and ab.sh start
# (sourced, not run). The caller sets W (a work directory) and Q (the queen
# binary), and SECRET (a cluster secret file) for a deployment's cluster
# plane: a follower then prepares the pushes it receives and asks the
# leader for read indexes (ARCHITECTURE.md, "Forwarding"). Ports
# 16632-16652 (HTTP) and 17632-17652 (Raft) on 127.0.0.1; a caller that
# must not meet those scripts' clusters sets HTTP_BASE and RAFT_BASE
# (node i uses BASE + 10 i) before sourcing this file.

HTTP_BASE=${HTTP_BASE:-16622}
RAFT_BASE=${RAFT_BASE:-17622}
URLS3=http://127.0.0.1:$((HTTP_BASE + 10)),http://127.0.0.1:$((HTTP_BASE + 20)),http://127.0.0.1:$((HTTP_BASE + 30))
PEERS3=n1@127.0.0.1:$((RAFT_BASE + 10)),n2@127.0.0.1:$((RAFT_BASE + 20)),n3@127.0.0.1:$((RAFT_BASE + 30))

# start1 I [ARGS]: starts node nI (1, 2 or 3) of the cluster on its data
# directory with the binary $Q, in the background, and records its pid in
# $W/nI.pid (upgrade.sh restarts one node at a time).
start1() {
	local i=$1
	shift
	"$Q" serve --data "$W/n$i" --node-id n$i --http 127.0.0.1:$((HTTP_BASE + 10 * i)) --raft 127.0.0.1:$((RAFT_BASE + 10 * i)) \
		--peers $PEERS3 ${SECRET:+--cluster-secret-file "$SECRET"} --log-level warn "$@" 2>>"$W/n$i.log" &
	echo $! >"$W/n$i.pid"
}

# await_leader: waits until a node leads and sets leader to its base URL.
await_leader() {
	local i p
	leader=""
	until [ -n "$leader" ]; do
		sleep 0.2
		for i in 1 2 3; do
			p=$((HTTP_BASE + 10 * i))
			if curl -s http://127.0.0.1:$p/health 2>/dev/null | grep -q '"role":"leader"'; then leader=http://127.0.0.1:$p; fi
		done
	done
}

# start3 [ARGS]: three fresh nodes, with ARGS added to each one's flags;
# returns once one leads, with leader and follower set to base URLs.
start3() {
	rm -rf "$W/n1" "$W/n2" "$W/n3"
	local i p
	for i in 1 2 3; do
		start1 $i "$@"
	done
	await_leader
	follower=""
	for i in 1 2 3; do
		p=http://127.0.0.1:$((HTTP_BASE + 10 * i))
		if [ "$p" != "$leader" ] && [ -z "$follower" ]; then follower=$p; fi
	done
}

# stop3 stops every background job of the caller and removes the cluster's
# data before it settles: deleting gigabytes (ext4 with discard here) is
# work the next cluster's measurement should not share the disk with.
stop3() {
	local j
	for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$W/n1" "$W/n2" "$W/n3"
	sync
	sleep 2
}
