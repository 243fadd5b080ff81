// Package backups assembles the backup file GET /api/v1/system/backup
// streams (the format is engine/backup's): each Raft group's state held
// as a View while the file is written, either a snapshot of this node's
// replica (Local) or another node's one-group backup file being read
// (Remote), and the manifest's account of them (Describe).
//
// It is apart from package server because it has invariants of its own
// that hold whatever the route does: a View owns what it holds and lets
// go of it on every path; another node's file must name the one group
// asked for, and its stream is copied frame by frame with every checksum
// verified and the file's end read, so a stream cut short fails the
// backup instead of passing for a whole group; a stalled reader times out
// while a long backup does not (DeadlineWriter). The server decides which
// groups come from where and holds the connection; this package writes
// what it is given and knows nothing of the server.
package backups
