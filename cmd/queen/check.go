package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"

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
	// A node that spreads queues over Raft groups (--groups) keeps the
	// directory and groups 2.. under groups/<id>/: one line each. On R of
	// N it holds only the groups placed on it, and a replica moved away is
	// retired (its engine deleted): group 1's engine, the data directory's
	// own, may then be missing too, and a group with none is said so.
	groups, err := os.ReadDir(filepath.Join(*data, "groups"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var ids []uint64
	for _, g := range groups {
		if id, err := strconv.ParseUint(g.Name(), 10, 32); err == nil && g.IsDir() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	applied, d, err := checkEngine(filepath.Join(*data, "engine"))
	switch {
	case errors.Is(err, engine.ErrNoStore) && len(ids) > 0:
		fmt.Println("group 1: no replica on this node")
	case errors.Is(err, engine.ErrNoStore):
		return fmt.Errorf("no store in %s: is it the directory `queen serve --data` was given?", *data)
	case err != nil:
		return err
	default:
		fmt.Printf("ok: applied index %d, digest %x\n", applied, d)
	}
	for _, id := range ids {
		applied, d, err := checkEngine(filepath.Join(*data, "groups", strconv.FormatUint(id, 10), "engine"))
		switch {
		case errors.Is(err, engine.ErrNoStore):
			fmt.Printf("group %d: no replica on this node\n", id)
		case err != nil:
			return fmt.Errorf("group %d: %w", id, err)
		default:
			fmt.Printf("ok: group %d applied index %d, digest %x\n", id, applied, d)
		}
	}
	return nil
}

// checkEngine opens one engine read-only, walks it and digests it.
func checkEngine(dir string) (uint64, [32]byte, error) {
	opts := engine.DefaultOptions()
	opts.ReadOnly = true
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := engine.Open(dir, opts)
	if err != nil {
		return 0, [32]byte{}, err
	}
	defer e.Close()
	if err := e.Check(); err != nil {
		return 0, [32]byte{}, err
	}
	d, err := e.Digest()
	return e.Applied(), d, err
}
