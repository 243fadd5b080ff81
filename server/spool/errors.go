package spool

import "errors"

// ErrWrite is wrapped by Write when the items could not be made durable (a
// create, write, fsync, close or rename failed); the file was taken back, so
// nothing is replayed of them.
var ErrWrite = errors.New("spool: write failed")
