package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/queenmq/queen/engine/backup"
	"github.com/queenmq/queen/raft"
)

// backupStall is how long a backup download may go without a byte before
// it is given up.
const backupStall = 60 * time.Second

// backupCmd writes a running cluster's state to a file (GET
// /api/v1/system/backup), or checks a file with --verify. The file is
// written as FILE.partial, checked as it arrives, and renamed to FILE only
// once its trailer has checked: a FILE is always a complete backup.
func backupCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:6632", "HTTP URL of any node of the cluster")
	file := fs.String("out", "", "the backup file to write")
	verify := fs.String("verify", "", "check this backup file instead of taking one")
	local := fs.Bool("local", false, "have the node serve its own copy (after a read-index wait) instead of relaying to the leader")
	token, ca, asJSON := clientFlags(fs)
	if err := parseEnvFlags(fs, args, os.Getenv, clientEnv...); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case *verify != "":
		return verifyBackup(*verify, *asJSON, out)
	case *file == "":
		return errors.New("--out FILE is required (or --verify FILE)")
	}
	c, err := newAPIClient(*token, *ca, out)
	if err != nil {
		return err
	}
	var bar io.Writer
	if !*asJSON && term.IsTerminal(int(os.Stderr.Fd())) {
		bar = os.Stderr
	}
	start := time.Now()
	m, n, err := saveBackup(c, strings.TrimRight(*base, "/"), *local, *file, bar)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if *asJSON {
		return json.NewEncoder(out).Encode(map[string]any{"file": *file, "bytes": n, "seconds": secs, "manifest": m})
	}
	fmt.Fprintf(out, "wrote %s: %s in %.1fs (%.1f MB/s), node %s, %s\n", *file, sizeOf(n), secs,
		float64(n)/1e6/max(secs, 1e-9), m.Node, describeGroups(m))
	return nil
}

// saveBackup downloads a backup into file; progress, when not nil, gets a
// progress bar. It returns the manifest and the file's size.
func saveBackup(c *apiClient, base string, local bool, file string, progress io.Writer) (_ backup.Manifest, _ int64, err error) {
	partial := file + ".partial"
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return backup.Manifest{}, 0, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(partial)
		}
	}()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	u := base + "/api/v1/system/backup"
	if local {
		u += "?" + url.Values{"local": {"true"}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return backup.Manifest{}, 0, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	// The client's timeout bounds a whole exchange; a backup takes as long
	// as the store is large, so only a stall ends it (watchdog).
	hc := *c.hc
	hc.Timeout = 0
	dog := time.AfterFunc(backupStall, func() { cancel(fmt.Errorf("no data for %s", backupStall)) })
	defer dog.Stop()
	resp, err := hc.Do(req)
	if err != nil {
		return backup.Manifest{}, 0, errors.Join(err, context.Cause(ctx))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct{ Error, Code string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return backup.Manifest{}, 0, fmt.Errorf("GET %s: %d %s (%s)", u, resp.StatusCode, e.Error, e.Code)
		}
		return backup.Manifest{}, 0, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	body := &countingReader{r: resp.Body, onRead: func() { dog.Reset(backupStall) }}
	var src io.Reader = body
	if progress != nil {
		bar := progressbar.NewOptions64(-1, progressbar.OptionSetWriter(progress), progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("backup"), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(200*time.Millisecond))
		defer bar.Finish()
		src = io.TeeReader(src, bar)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	m, err := backup.Verify(io.TeeReader(src, bw))
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		return m, 0, fmt.Errorf("the backup did not arrive whole, nothing written: %w", err)
	}
	if err := errors.Join(bw.Flush(), f.Sync(), f.Close()); err != nil {
		return m, 0, err
	}
	return m, body.n.Load(), renameSynced(partial, file)
}

// countingReader counts what it reads and calls onRead at every read.
type countingReader struct {
	r      io.Reader
	n      atomic.Int64
	onRead func()
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	c.onRead()
	return n, err
}

// verifyBackup checks a backup file and prints its manifest.
func verifyBackup(file string, asJSON bool, out io.Writer) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := backup.Verify(f)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if asJSON {
		return json.NewEncoder(out).Encode(m)
	}
	fmt.Fprintf(out, "%s: complete and intact; format %d, taken %s on node %s, %s\n", file, m.Format,
		m.Created.Format(time.RFC3339), m.Node, describeGroups(m))
	return nil
}

func describeGroups(m backup.Manifest) string {
	var parts []string
	for _, g := range m.Groups {
		var msgs int64
		for _, n := range g.Queues {
			msgs += n
		}
		parts = append(parts, fmt.Sprintf("group %d at index %d (%d queues, %d messages)", g.ID, g.Index, len(g.Queues), msgs))
	}
	return strings.Join(parts, ", ")
}

func sizeOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}

// restoreCmd writes a new data directory from a backup file, offline:
// `queen serve` on it then starts a new cluster of one node holding the
// backup's state, which other nodes join as usual.
func restoreCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	in := fs.String("in", "", "the backup file")
	data := fs.String("data", "./data", "the data directory to create (absent or empty)")
	nodeID := fs.String("node-id", "node1", "the id the restored node will run with (serve's --node-id)")
	raftAddr := fs.String("raft", "", "the Raft address the restored node will run with (serve's --raft; empty: a single node without it)")
	queue := fs.String("queue", "", "restore only this queue, into the running cluster at --url, as --as")
	as := fs.String("as", "", "with --queue: the new queue's name")
	base := fs.String("url", "http://127.0.0.1:6632", "with --queue: HTTP URL of any node of the running cluster")
	resume := fs.Bool("resume", false, "with --queue: finish an interrupted restore into --as")
	token, ca, _ := clientFlags(fs)
	if err := parseEnvFlags(fs, args, os.Getenv, "data", "node-id", "raft", "url", "token", "tls-ca"); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case *in == "":
		return errors.New("--in FILE is required")
	case *queue != "" && (*as == "" || *as == *queue):
		return errors.New("--queue Q needs --as NAME, a name other than Q")
	case *queue != "":
		c, err := newAPIClient(*token, *ca, out)
		if err != nil {
			return err
		}
		c.hc.Timeout = 2 * time.Minute
		r := restoreQueue{in: *in, queue: *queue, as: *as, base: strings.TrimRight(*base, "/"), resume: *resume, c: c, out: out}
		return r.run()
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	start := time.Now()
	r, err := backup.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	defer r.Close()
	opts := raft.DefaultOptions()
	opts.Dir, opts.ID, opts.RaftAddr = *data, *nodeID, *raftAddr
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	switch err := raft.Restore(opts, r); {
	case errors.Is(err, raft.ErrNotEmpty):
		return fmt.Errorf("%w: restore into a new directory", err)
	case errors.Is(err, backup.ErrCorrupt), errors.Is(err, backup.ErrNewer):
		return fmt.Errorf("%s: %w; nothing was written", *in, err)
	case err != nil:
		return fmt.Errorf("%w; nothing was written", err)
	}
	m := r.Manifest()
	st, _ := f.Stat()
	secs := time.Since(start).Seconds()
	fmt.Fprintf(out, "restored %s into %s in %.1fs (%.1f MB/s of backup): %s\n", *in, *data, secs,
		float64(st.Size())/1e6/max(secs, 1e-9), describeGroups(m))
	// --http on loopback: serve's default listens on every interface
	// (docs/decisions.md C12), which a restored copy should not do before
	// its operator says so.
	serve := []string{"queen serve", "--data", *data, "--node-id", *nodeID, "--http", "127.0.0.1:6632"}
	if *raftAddr != "" {
		serve = append(serve, "--raft", *raftAddr)
	}
	if len(m.Groups) > 1 {
		serve = append(serve, "--groups", fmt.Sprint(len(m.Groups)-1))
	}
	abs, _ := filepath.Abs(*data)
	fmt.Fprintf(out, "start it, as a new cluster of one node, with: %s\n(data in %s)\n", strings.Join(serve, " "), abs)
	return nil
}
