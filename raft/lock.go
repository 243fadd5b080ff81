package raft

import "io"

// Lock takes, without blocking, the lock a running node holds on its data
// directory (dir/LOCK, taken by Open and Recover), for tools that must not
// work under a running node, such as `queen check`. It returns ErrInUse
// while a node holds it. It creates nothing: without a LOCK file no node of
// this version has run in dir, there is nothing to hold, and the returned
// closer does nothing. Close the closer to release the lock.
func Lock(dir string) (io.Closer, error) { return lockDir(dir, false) }
