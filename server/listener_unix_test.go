//go:build unix

package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// The connection flood of the issue, in-process: with every descriptor
// taken, a client connects and the server's accept fails with EMFILE. The
// server backs off and retries instead of returning from Serve (which
// stopped the node, with exit status 0), and serves the connection once
// descriptors are free again.
//
// The descriptor limit is lowered so that taking every descriptor is
// cheap; the client's socket is made before, so that its connect needs
// none.
func TestServer_Serve_OutlivesDescriptorExhaustion(t *testing.T) {
	ms := metrics.NewSet()
	s, err := server.New(servertest.NewLocalBroker(t), server.Options{MaxConns: 100,
		Logger: slog.New(slog.DiscardHandler), Metrics: ms, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = min(old.Cur, 1024)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var burned []*os.File
	release := func() {
		for _, f := range burned {
			f.Close()
		}
		burned = nil
	}
	t.Cleanup(func() {
		release()
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	})

	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range low.Cur {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("take descriptors: %v", err)
			}
			break
		}
		burned = append(burned, f)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("connect: %v", err)
	}
	// Non-blocking from here, so that the file's read deadline works.
	if err := syscall.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the server's accept fails for want of descriptors", func() bool {
		return len(served) > 0 || series(t, ms, "queen_http_accept_errors_total") >= 1
	})
	release()
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v, out of descriptors; want it to go on", err)
	default:
	}

	client := os.NewFile(uintptr(fd), "client")
	defer client.Close()
	if _, err := client.Write([]byte("GET /health HTTP/1.1\r\nHost: queen\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := client.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 12)
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "HTTP/1.1 200" {
		t.Fatalf("the connection accepted once descriptors were free: %q, %v; want HTTP/1.1 200", buf, err)
	}
}
