// Package meter is what a node measures at the HTTP edge and how it shows
// it in the Prometheus text format: the message counters derived from the
// broker's answers (Messages: pushes, pops, acks, nacks, dead letters,
// transactions), the gauges read at scrape time (the node's Raft view and
// each group's, each group's voters and how many groups have fewer than
// they want, free space, which group holds each queue, dead-letter depth
// per queue and per consumer group) and the escaping of label values.
//
// With --groups it also counts the queue moves this node ran (Moves,
// told by cluster.HostOptions.OnMove).
//
// It is apart from package server because none of it is a route's logic:
// /metrics/prometheus is one handler that writes the metric set and then
// asks this package for the rest, and the series names, their labels and
// their escaping are then read, and kept stable, in one place (dashboards
// and alerts depend on them; docs/decisions.md B8). It never imports
// package server: what it reads comes in as values (raft.Status,
// diskspace.View) or through the few broker methods it needs (DLQSource).
//
// # Series written at scrape time
//
//	queen_raft_applied_index, queen_raft_term, queen_raft_has_leader, queen_raft_is_leader
//	queen_storage_errors_total, queen_storage_faulted          the broker's storage
//	queen_raft_group_{applied_index,term,has_leader,is_leader}{group}   with --groups
//	queen_queue_group{queue}                                    with --groups
//	queen_queue_moves_in_progress, queen_group_queues{group}    with --groups (WritePlacement)
//	queen_raft_group_voters{group}, queen_groups_under_replicated   with --groups (WriteVoters)
//	queen_storage_free_bytes{dir}, queen_storage_reserve_bytes,
//	queen_storage_below_reserve, queen_storage_nodes_below_reserve   (server/diskspace)
//	queen_dlq_depth{queue}, queen_dlq_depth_by_group{queue,group}
//
// A gauge that says yes or no is 1 or 0 (Bool).
//
// # Counted once
//
// Messages only adds up the answers it is given; which node counts an
// answer is the caller's rule (ARCHITECTURE.md, "Counting once": the node
// that answers the client). The counters of what the edge itself did
// (requests, overload refusals, relays, parked and abandoned pops, sealed
// payloads) stay with package server, beside the code that does it.
package meter
