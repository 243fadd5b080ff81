package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/queenmq/queen/raft"
)

// recoverCmd rewrites a stopped node's Raft configuration: the way back for
// a node whose cluster lost its quorum for good. The new membership comes
// from --peers or, without it, from DIR/peers.json (hashicorp/raft's format),
// which is renamed peers.json.applied once used.
func recoverCmd(args []string) error {
	fs := flag.NewFlagSet("recover", flag.ContinueOnError)
	data := fs.String("data", "./data", "the stopped node's data directory")
	list := fs.String("peers", "", "the new membership, id@raftHost:raftPort,... (default: read DIR/peers.json)")
	// Not --peers: a node's environment holds the membership being replaced.
	if err := parseEnvFlags(fs, args, os.Getenv, "data"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	peers, err := parsePeers(*list)
	if err != nil {
		return err
	}
	peersFile := ""
	if len(peers) == 0 {
		peersFile = filepath.Join(*data, "peers.json")
		if peers, err = raft.ReadPeersJSON(peersFile); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no --peers and no %s: name the surviving nodes with one or the other", peersFile)
			}
			return err
		}
	}
	opts := raft.DefaultOptions()
	opts.Dir = *data
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	index, err := raft.Recover(opts, peers)
	switch {
	case errors.Is(err, raft.ErrInUse):
		return fmt.Errorf("%s is in use by a running node: stop it first", *data)
	case errors.Is(err, raft.ErrNoState):
		return fmt.Errorf("nothing to recover: %w", err)
	case err != nil:
		return err
	}
	var desc []string
	for _, p := range peers {
		role := "voter"
		if p.NonVoter {
			role = "non-voter"
		}
		desc = append(desc, fmt.Sprintf("%s@%s (%s)", p.ID, p.Addr, role))
	}
	fmt.Printf("recovered %s: configuration at index %d: %s\n", *data, index, strings.Join(desc, ", "))
	if peersFile != "" {
		if err := renameSynced(peersFile, peersFile+".applied"); err != nil {
			return err
		}
		fmt.Printf("renamed %s to peers.json.applied\n", peersFile)
	}
	return nil
}

// renameSynced renames a file and fsyncs its directory, so the rename
// survives a crash.
func renameSynced(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", filepath.Dir(to), err)
	}
	return nil
}
