package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/queenmq/queen/bench"
)

// benchCmd runs `queen bench`: load against running nodes (see bench.Run
// and `queen bench -h`). The summary goes to stdout, the progress bar to
// stderr when it is a terminal and --json is off.
func benchCmd(args []string) error {
	c, err := bench.ParseFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress io.Writer
	if !c.JSON && term.IsTerminal(int(os.Stderr.Fd())) {
		progress = os.Stderr
	}
	rep, err := bench.Run(ctx, c.Options, progress)
	if err != nil {
		return err
	}
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(rep)
	}
	return rep.WriteText(os.Stdout)
}
