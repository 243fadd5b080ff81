package raft

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Raft's lines through the adapter: one record each, with Raft's info at
// debug, expected warnings at info, a repeated failure once per window per
// peer with the count of those left out, and no timestamp inside msg.
func TestRaftLogger_LevelsAndRepeats(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := newRaftLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Info("entering follower state", "follower", "n1")
	l.Warn("heartbeat timeout reached, starting election", "last-leader-id", "")
	l.Warn("Election timeout reached, restarting election") // a split vote
	l.Error("failed to take snapshot", "error", hraft.ErrRaftShutdown)
	for range 5 {
		l.Error("failed to heartbeat to", "peer", "n3", "error", "connection refused")
	}
	l.Error("failed to heartbeat to", "peer", "n2", "error", "connection refused")
	l.Error("failed to decode incoming command", "error", "transport shutdown")
	l.Error("peer has newer term, stopping replication", "peer", "n2") // a routine hand-off
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5 (elections and a hand-off at info, no snapshot error while stopping, one failure per peer):\n%s", len(lines), out)
	}
	if !strings.Contains(lines[4], "level=INFO") || !strings.Contains(lines[4], "newer term") {
		t.Fatalf("a leader's hand-off: %s", lines[4])
	}
	if !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "starting election") ||
		!strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], "restarting election") ||
		!strings.Contains(lines[2], "level=ERROR") || !strings.Contains(lines[2], "peer=n3") || !strings.Contains(lines[3], "peer=n2") {
		t.Fatalf("lines:\n%s", out)
	}
	if strings.Contains(out, "[WARN]") || strings.Count(out, "time=") != 5 {
		t.Fatalf("one timestamp per line, no hclog prefix:\n%s", out)
	}
	// After the window the next one carries the count of those left out.
	l.rep.last["failed to heartbeat to n3"].at = time.Now().Add(-repeatWindow)
	buf.Reset()
	l.Error("failed to heartbeat to", "peer", "n3", "error", "connection refused")
	if !strings.Contains(buf.String(), "repeated=4") {
		t.Fatalf("after the window: %s", buf.String())
	}
}
