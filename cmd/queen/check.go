package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/queenmq/queen/engine"
)

// check opens a stopped node's engine and runs its consistency walk.
func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	data := fs.String("data", "./data", "the node's data directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := engine.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := engine.Open(filepath.Join(*data, "engine"), opts)
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
