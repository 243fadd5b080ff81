package spool

import (
	"os"
)

// fileSystem is the file operations whose order and failures make the spool
// durable or not (Spool.Write, open). osFS is the real one; tests wrap
// it to record the order of the syncs and to fail them.
type fileSystem interface {
	// Create creates name for writing; it fails if name exists.
	Create(name string) (file, error)
	// Rename renames oldname to newname.
	Rename(oldname, newname string) error
	// Remove removes name.
	Remove(name string) error
	// SyncDir fsyncs the directory dir, making the creations, renames and
	// removals of its entries durable.
	SyncDir(dir string) error
}

// file is a spool file being written.
type file interface {
	Write(p []byte) (int, error)
	// Sync fsyncs the file's contents.
	Sync() error
	Close() error
}

// osFS is fileSystem on the operating system's file system.
type osFS struct{}

func (osFS) Create(name string) (file, error) {
	return os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
}

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
