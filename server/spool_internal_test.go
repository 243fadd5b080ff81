package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// pushPaused is a broker with push maintenance on: every push goes to the
// spool. Nothing else of it is called.
type pushPaused struct{ Broker }

func (pushPaused) Maintenance() (push, pop bool) { return true, false }

// spoolServer serves a push-paused broker over loopback HTTP with its
// spool in dir; it returns the push URL.
func spoolServer(t *testing.T, dir string) string {
	t.Helper()
	s, err := New(pushPaused{}, Options{SpoolDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	})
	return "http://" + ln.Addr().String() + "/api/v1/push"
}

type answer struct {
	status int
	body   string
	err    error
}

func postPush(url string) answer {
	resp, err := http.Post(url, "application/json", strings.NewReader(
		`{"items":[{"queue":"q","payload":{"n":1},"transactionId":"t1"},{"queue":"q","payload":{"n":2}}]}`))
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b), err: err}
}

// TestServer_BufferPush_WriteFailureIsNeverBuffered: a push during push
// maintenance is answered "buffered" once its items are in the spool (the
// spool package tests when that is durable), and 500 spool_write_failed,
// never "buffered", when the spool cannot write them (here: its directory
// is gone).
func TestServer_BufferPush_WriteFailureIsNeverBuffered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := spoolServer(t, dir)
	if a := postPush(url); a.err != nil || a.status != 201 || strings.Count(a.body, `"status":"buffered"`) != 2 || !strings.Contains(a.body, `"transactionId":"t1"`) {
		t.Fatalf("push: %+v", a)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	a := postPush(url)
	if a.err != nil || a.status != 500 || !strings.Contains(a.body, `"code":"spool_write_failed"`) || strings.Contains(a.body, `"buffered"`) {
		t.Fatalf("push with the spool's directory gone: %+v", a)
	}
}
