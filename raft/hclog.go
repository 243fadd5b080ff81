package raft

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
)

// raftLogger is hashicorp/raft's logger as a view of the node's slog
// logger, so that Raft's lines are the node's lines: one timestamp, the
// node's format, and levels an operator can act on.
//
//   - Raft's Info lines (elections, snapshots, leaders it hears of) are
//     Debug here: the node logs leadership itself, once per change
//     (leaderLoop). Trace and Debug stay Debug.
//   - Warnings and errors that are expected are Info: a node that starts
//     alone times out its heartbeat and elects itself every time, and a
//     leader that hands its leadership over (a transfer, a rebalance)
//     meets the new leader's term on each follower it replicated to.
//   - A warning or an error that repeats (a peer that is down fails every
//     heartbeat, ~1.5 lines a second) is logged once per repeatWindow with
//     how many were left out since.
type raftLogger struct {
	log   *slog.Logger
	name  string
	args  []any
	level *hclog.Level
	rep   *repeats
}

// repeatWindow is how often one repeated Raft warning or error is logged.
const repeatWindow = 30 * time.Second

// expected are the Raft warnings and errors that are normal events, logged
// at Info: a WARN or an ERROR should mean an operator may need to act.
var expected = []string{
	"heartbeat timeout reached, starting election",
	"election timeout reached, restarting election",
	"rejecting pre-vote request since we have a leader",
	// Error in hashicorp/raft's replication.go: the old leader's
	// replication to a peer that voted in a newer term; the node logs
	// the leadership change itself.
	"peer has newer term, stopping replication",
}

func newRaftLogger(log *slog.Logger) *raftLogger {
	level := hclog.Trace
	return &raftLogger{log: log, name: "raft", level: &level, rep: &repeats{last: map[string]*repeat{}}}
}

// repeats remembers when each repeated line was last logged.
type repeats struct {
	mu   sync.Mutex
	last map[string]*repeat
}

type repeat struct {
	at      time.Time
	dropped int
}

// pass reports whether msg may be logged now, and how many times it was
// left out since it last was.
func (r *repeats) pass(msg string, now time.Time) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.last[msg]
	if p == nil {
		if len(r.last) > 1024 {
			clear(r.last) // bounded: only a few distinct lines ever repeat
		}
		r.last[msg] = &repeat{at: now}
		return true, 0
	}
	if now.Sub(p.at) < repeatWindow {
		p.dropped++
		return false, 0
	}
	n := p.dropped
	p.at, p.dropped = now, 0
	return true, n
}

func (l *raftLogger) Log(level hclog.Level, msg string, args ...any) {
	if level < *l.level || level == hclog.Off {
		return
	}
	lvl := slog.LevelDebug
	switch level {
	case hclog.Warn:
		lvl = slog.LevelWarn
	case hclog.Error:
		lvl = slog.LevelError
	}
	if lvl >= slog.LevelWarn {
		for _, e := range expected {
			if len(msg) >= len(e) && strings.EqualFold(msg[:len(e)], e) { // Raft capitalises some
				lvl = slog.LevelInfo
			}
		}
	}
	if lvl >= slog.LevelWarn && shuttingDown(args) {
		lvl = slog.LevelDebug // the node's own parts stopping
	}
	ctx := context.Background()
	if !l.log.Enabled(ctx, lvl) {
		return
	}
	attrs := append([]any{"component", l.name}, l.args...)
	attrs = append(attrs, args...)
	if lvl >= slog.LevelWarn {
		key := msg
		for i := 0; i+1 < len(args); i += 2 {
			if k, _ := args[i].(string); k == "peer" {
				key += fmt.Sprint(" ", args[i+1]) // one count per peer
			}
		}
		ok, dropped := l.rep.pass(key, time.Now())
		if !ok {
			return
		}
		if dropped > 0 {
			attrs = append(attrs, "repeated", dropped)
		}
	}
	l.log.Log(ctx, lvl, msg, attrs...)
}

func (l *raftLogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *raftLogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *raftLogger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *raftLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *raftLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *raftLogger) IsTrace() bool { return l.log.Enabled(context.Background(), slog.LevelDebug) }
func (l *raftLogger) IsDebug() bool { return l.log.Enabled(context.Background(), slog.LevelDebug) }
func (l *raftLogger) IsInfo() bool  { return l.log.Enabled(context.Background(), slog.LevelDebug) }
func (l *raftLogger) IsWarn() bool  { return l.log.Enabled(context.Background(), slog.LevelInfo) }
func (l *raftLogger) IsError() bool { return l.log.Enabled(context.Background(), slog.LevelError) }

func (l *raftLogger) ImpliedArgs() []any { return l.args }

func (l *raftLogger) With(args ...any) hclog.Logger {
	c := *l
	c.args = append(append([]any(nil), l.args...), args...)
	return &c
}

func (l *raftLogger) Name() string { return l.name }

func (l *raftLogger) Named(name string) hclog.Logger {
	c := *l
	c.name = l.name + "." + name
	return &c
}

func (l *raftLogger) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	return &c
}

func (l *raftLogger) SetLevel(level hclog.Level) { *l.level = level }
func (l *raftLogger) GetLevel() hclog.Level      { return *l.level }

func (l *raftLogger) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(nil), "", 0)
}

func (l *raftLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer { return stdWriter{l} }

// shuttingDown reports an error argument that says the transport shut
// down: what a node's own stop makes its listener report.
func shuttingDown(args []any) bool {
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == "error" {
			// The transport closing under its listener, or a snapshot
			// Raft was about to take as the node stops.
			if e := fmt.Sprint(args[i+1]); e == "transport shutdown" || e == hraft.ErrRaftShutdown.Error() {
				return true
			}
		}
	}
	return false
}

// stdWriter takes the lines of the standard library's logger (Raft's
// network transport uses one) as Raft warnings.
type stdWriter struct{ l *raftLogger }

func (w stdWriter) Write(p []byte) (int, error) {
	w.l.Warn(strings.TrimSpace(string(p)))
	return len(p), nil
}
