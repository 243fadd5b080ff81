package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// check opens a stopped node's engine read-only and runs its consistency
// walk. It creates nothing: a directory with no store is refused, and a
// directory a running node holds (its LOCK) is refused by name.
func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	data := fs.String("data", "./data", "the node's data directory")
	if err := parseEnvFlags(fs, args, os.Getenv, "data"); err != nil {
		return err
	}
	lock, err := raft.Lock(*data)
	if err != nil {
		if errors.Is(err, raft.ErrInUse) {
			return fmt.Errorf("%w: stop the node before checking its store", err)
		}
		return err
	}
	defer lock.Close()
	opts := engine.DefaultOptions()
	opts.ReadOnly = true
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := engine.Open(filepath.Join(*data, "engine"), opts)
	if errors.Is(err, engine.ErrNoStore) {
		return fmt.Errorf("no store in %s: is it the directory `queen serve --data` was given?", *data)
	}
	if err != nil {
		return err
	}
	defer e.Close()
	if err := e.Check(); err != nil {
		return err
	}
	d, err := e.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("ok: applied index %d, digest %x\n", e.Applied(), d)
	return nil
}
