// Command jsbench runs NATS JetStream servers and drives them the way
// `queen bench` drives queen, so bench/compare.sh can put the two side by
// side in one run. It is its own module: the broker never links NATS.
//
//	jsbench serve --name n1 --port 14222 --cluster-port 16222 --routes nats://127.0.0.1:16223,... --dir DIR
//	jsbench load --url nats://127.0.0.1:14222 --replicas 3 --workload push --duration 8s
//	jsbench load --url nats://127.0.0.1:20632,... --replicas 3 --leader --messages 1000000 --duration 60s
//
// Durability parity: the servers run with `sync_interval: always`, so a
// publish is acknowledged after the stream's replicas have fsynced it, as
// a queen push is answered after a quorum of nodes fsynced its entry.
// `--sync default` keeps NATS's default (fsync every two minutes) to show
// what that costs. load prints one JSON object in the shape of
// `queen bench --json` (ops.push / ops.ack with msgs_per_s and
// latency_ms percentiles).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: jsbench serve|load [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "jsbench:", err)
		os.Exit(1)
	}
}

// serve runs one JetStream server until SIGTERM or SIGINT.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	name := fs.String("name", "n1", "server name, unique in the cluster")
	port := fs.Int("port", 14222, "client port on 127.0.0.1")
	clusterPort := fs.Int("cluster-port", 0, "route port on 127.0.0.1 (0: no cluster)")
	routes := fs.String("routes", "", "comma-separated nats://host:port of every server's route port")
	dir := fs.String("dir", "", "JetStream store directory")
	sync := fs.String("sync", "always", "always (fsync before every acknowledgement) or default (NATS's 2 min interval)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	conf := fmt.Sprintf("server_name: %q\nlisten: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n", *name, *port, filepath.Clean(*dir))
	switch *sync {
	case "always":
		conf += "  sync_interval: always\n"
	case "default":
	default:
		return fmt.Errorf("--sync %q: want always or default", *sync)
	}
	conf += "}\n"
	if *clusterPort != 0 {
		conf += fmt.Sprintf("cluster {\n  name: bench\n  listen: \"127.0.0.1:%d\"\n  routes: [%s]\n}\n", *clusterPort, quoteList(*routes))
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(*dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return err
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		return errors.New("server not ready after 30 s")
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

func quoteList(csv string) string {
	var out string
	for i, r := range splitComma(csv) {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%q", r)
	}
	return out
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// report is the subset of `queen bench --json` compare.sh reads.
type report struct {
	Workload string        `json:"workload"`
	System   string        `json:"system"`
	Replicas int           `json:"replicas"`
	Conns    int           `json:"conns"`
	InFlight int           `json:"inflight"`
	Batch    int           `json:"batch"`
	Size     int           `json:"size"`
	Seconds  float64       `json:"seconds"`
	Ops      map[string]op `json:"ops"`
	Errors   int64         `json:"errors"`
}

type op struct {
	Messages  int64              `json:"messages"`
	MsgsPerS  float64            `json:"msgs_per_s"`
	LatencyMS map[string]float64 `json:"latency_ms"`
}

// load creates a stream (replacing one of the same name) and drives it.
// push: conns publishers, each with up to inflight unacknowledged async
// publishes of size-byte JSON messages. popack: the stream is filled first
// (not timed), then conns pullers each fetch batch messages, ack each, and
// wait for the server to confirm the batch's last ack before the next
// fetch, as a queen consumer's ack/batch returns after its commit. It
// measures until the last ack: until --duration, or until the fill is
// drained if that comes first.
func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	url := fs.String("url", "nats://127.0.0.1:14222", "server URL(s), comma-separated")
	replicas := fs.Int("replicas", 1, "stream replicas (1 or 3)")
	workload := fs.String("workload", "push", "push or popack")
	conns := fs.Int("conns", 32, "connections (publishers or pullers)")
	inflight := fs.Int("inflight", 100, "unacknowledged publishes per publisher")
	batch := fs.Int("batch", 100, "messages per fetch (popack)")
	size := fs.Int("size", 1024, "message size in bytes")
	dur := fs.Duration("duration", 8*time.Second, "how long to measure")
	fill := fs.Int("fill", 100000, "messages published before a popack run")
	rate := fs.Int("rate", 0, "push: publishes per second over all publishers (0: as fast as acknowledged)")
	messages := fs.Int("messages", 0, "push: stop after this many publishes (0: run for --duration; it still bounds the run)")
	toLeader := fs.Bool("leader", false, "push, one stream: connect every publisher to the stream leader's server, "+
		"the first of --url that names it (bench/cpu.sh: queen's pushes go to its leader too)")
	streams := fs.Int("streams", 1, "push: streams BENCH0.. (one: BENCH), publisher i publishing to stream i mod streams "+
		"and connected to the i-th server of --url in turn (bench/capacity.sh SYSTEM=jetstream)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *streams < 1 || (*streams > 1 && *workload != "push") {
		return fmt.Errorf("--streams %d: want 1, or more with --workload push", *streams)
	}
	nc, js, err := connect(*url)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for k := range *streams {
		name, subject := streamOf(k, *streams)
		_ = js.DeleteStream(ctx, name)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject + ".>"},
			Replicas: *replicas, Storage: jetstream.FileStorage}); err != nil {
			return fmt.Errorf("create stream %s: %w", name, err)
		}
	}
	leader := ""
	if *toLeader {
		if *streams != 1 || *workload != "push" {
			return errors.New("--leader: want one stream and --workload push")
		}
		info, err := js.Stream(ctx, "BENCH")
		if err != nil {
			return fmt.Errorf("stream info: %w", err)
		}
		if c := info.CachedInfo().Cluster; c != nil {
			leader = c.Leader
		}
	}
	payload := jsonPayload(*size)
	r := report{Workload: *workload, System: "jetstream", Replicas: *replicas, Conns: *conns, InFlight: *inflight,
		Batch: *batch, Size: *size, Ops: map[string]op{}}
	switch *workload {
	case "push":
		r.Ops["push"], r.Seconds, r.Errors = publish(*url, *conns, *inflight, *rate, payload, *dur, *messages, *streams, leader)
	case "popack":
		if _, _, e := publish(*url, *conns, *inflight, 0, payload, 10*time.Minute, *fill, 1, ""); e > 0 {
			return fmt.Errorf("fill: %d publishes failed", e)
		}
		r.Ops["ack"], r.Seconds, r.Errors = pull(ctx, js, *url, *conns, *batch, *dur)
	default:
		return fmt.Errorf("--workload %q: want push or popack", *workload)
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// jsonPayload is a JSON object of about size bytes, like queen bench's.
func jsonPayload(size int) []byte {
	b := []byte(`{"id":1,"body":"`)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// streamOf is the name of the k-th of streams streams and the subject
// prefix it takes: BENCH and bench for one, BENCH<k> and bench<k> else.
func streamOf(k, streams int) (name, subject string) {
	if streams == 1 {
		return "BENCH", "bench"
	}
	return fmt.Sprintf("BENCH%d", k), fmt.Sprintf("bench%d", k)
}

// publish runs conns publishers for dur (or until limit messages when
// limit > 0) and returns the rate and the latency of each publish, from
// its send to its acknowledgement. Over several streams, publisher c
// publishes to stream c mod streams through the (c mod servers)-th server
// of url, as a queen client spreads its requests over every node. With
// leader set, every publisher connects to the server of that name.
func publish(url string, conns, inflight, rate int, payload []byte, dur time.Duration, limit, streams int, leader string) (op, float64, int64) {
	servers := splitComma(url)
	var (
		mu      sync.Mutex
		lats    []time.Duration
		acked   atomic.Int64
		sent    atomic.Int64
		errs    atomic.Int64
		wg      sync.WaitGroup
		started = time.Now()
		end     = started.Add(dur)
	)
	var interval time.Duration
	if rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(conns) / float64(rate))
	}
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The window below bounds what is in flight; the client's own
			// limit sits above it so it never stalls a publish.
			at := url
			if streams > 1 {
				at = servers[c%len(servers)]
			}
			nc, js, err := connectTo(at, leader, jetstream.WithPublishAsyncMaxPending(2*inflight+1),
				jetstream.WithPublishAsyncTimeout(time.Minute))
			if err != nil {
				errs.Add(1)
				return
			}
			defer nc.Close()
			_, prefix := streamOf(c%streams, streams)
			subject := fmt.Sprintf("%s.%d", prefix, c%16)
			var local []time.Duration
			type pending struct {
				f    jetstream.PubAckFuture
				sent time.Time
			}
			window := make(chan pending, inflight)
			done := make(chan struct{})
			go func() { // collects acknowledgements in send order
				defer close(done)
				for p := range window {
					select {
					case <-p.f.Ok():
						local = append(local, time.Since(p.sent))
						acked.Add(1)
					case err := <-p.f.Err():
						if errs.Add(1) <= 3 {
							fmt.Fprintln(os.Stderr, "jsbench: publish:", err)
						}
					}
				}
			}()
			next := time.Now()
			for time.Now().Before(end) && (limit == 0 || sent.Add(1) <= int64(limit)) {
				if interval > 0 {
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
					next = next.Add(interval)
				}
				t := time.Now()
				f, err := js.PublishAsync(subject, payload)
				if err != nil {
					if errs.Add(1) <= 3 {
						fmt.Fprintln(os.Stderr, "jsbench: publish:", err)
					}
					continue
				}
				window <- pending{f, t}
			}
			close(window)
			<-done
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	secs := time.Since(started).Seconds()
	return op{Messages: acked.Load(), MsgsPerS: float64(acked.Load()) / secs, LatencyMS: percentiles(lats)}, secs, errs.Load()
}

// pull drains the stream with conns pullers of one durable consumer.
func pull(ctx context.Context, js jetstream.JetStream, url string, conns, batch int, dur time.Duration) (op, float64, int64) {
	cons, err := js.CreateOrUpdateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{Durable: "bench",
		AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: conns * batch * 2})
	if err != nil {
		return op{}, 0, 1
	}
	var (
		mu      sync.Mutex
		lats    []time.Duration
		acked   atomic.Int64
		lastAck atomic.Int64 // since started, ns
		errs    atomic.Int64
		wg      sync.WaitGroup
		started = time.Now()
		end     = started.Add(dur)
	)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, js, err := connect(url)
			if err != nil {
				errs.Add(1)
				return
			}
			defer nc.Close()
			c, err := js.Consumer(ctx, "BENCH", cons.CachedInfo().Name)
			if err != nil {
				errs.Add(1)
				return
			}
			var local []time.Duration
			defer func() {
				mu.Lock()
				lats = append(lats, local...)
				mu.Unlock()
			}()
			for time.Now().Before(end) {
				t := time.Now()
				msgs, err := c.Fetch(batch, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					errs.Add(1)
					continue
				}
				var last jetstream.Msg
				n := 0
				for m := range msgs.Messages() {
					if last != nil {
						if err := last.Ack(); err != nil {
							errs.Add(1)
						}
					}
					last = m
					n++
				}
				if last == nil {
					return // drained
				}
				if err := last.DoubleAck(ctx); err != nil {
					errs.Add(1)
					continue
				}
				acked.Add(int64(n))
				local = append(local, time.Since(t))
				lastAck.Store(time.Since(started).Nanoseconds())
			}
		}()
	}
	wg.Wait()
	// Up to the last ack: a drained stream's last empty fetch is not work.
	secs := time.Duration(lastAck.Load()).Seconds()
	if secs == 0 {
		secs = time.Since(started).Seconds()
	}
	return op{Messages: acked.Load(), MsgsPerS: float64(acked.Load()) / secs, LatencyMS: percentiles(lats)}, secs, errs.Load()
}

// connectTo is connect to the server named leader, the first of url's
// servers that names it; to url when leader is empty.
func connectTo(url, leader string, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	if leader == "" {
		return connect(url, opts...)
	}
	for _, at := range splitComma(url) {
		nc, js, err := connect(at, opts...)
		if err != nil {
			return nil, nil, err
		}
		if nc.ConnectedServerName() == leader {
			return nc, js, nil
		}
		nc.Close()
	}
	return nil, nil, fmt.Errorf("no server of %s is the stream leader %s", url, leader)
}

// connect opens a connection of its own and a JetStream context on it.
func connect(url string, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func percentiles(lats []time.Duration) map[string]float64 {
	out := map[string]float64{}
	if len(lats) == 0 {
		return out
	}
	slices.Sort(lats)
	at := func(q float64) float64 {
		return float64(lats[int(q*float64(len(lats)-1))].Microseconds()) / 1000
	}
	out["p50"], out["p90"], out["p99"], out["p99.9"] = at(.5), at(.9), at(.99), at(.999)
	out["max"] = float64(lats[len(lats)-1].Microseconds()) / 1000
	return out
}
