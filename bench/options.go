package bench

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Workload is what the driver's connections do.
type Workload string

// The workloads.
const (
	// Push pushes batches of new messages.
	Push Workload = "push"
	// PopAck pops batches and acks every message it receives, until the
	// queues are drained (or the run's limits end it).
	PopAck Workload = "popack"
	// Mixed does both at once: half the connections push, half pop and ack.
	Mixed Workload = "mixed"
	// Read sends GET ReadPath on every connection: the latency of a read
	// route (e.g. through a follower, with and without
	// ?consistency=stale; docs/api.md §1.6).
	Read Workload = "read"
)

// Limits of a run. Every run is bounded: a run given neither a duration nor
// a message count lasts DefaultDuration, and none lasts beyond MaxDuration.
const (
	DefaultDuration = 10 * time.Second
	MaxDuration     = 10 * time.Minute
	MaxConns        = 1024
	MaxBatch        = 10000
	MaxPayloadSize  = 1 << 20
)

// Options configures a Run. Start from DefaultOptions.
type Options struct {
	// URLs are the base URLs of the nodes to drive (http://host:port).
	// Connection i talks to URLs[i % len(URLs)].
	URLs []string
	// AllowRemote permits URLs that are not loopback addresses. UNSAFE: it
	// aims the full load at another machine.
	AllowRemote bool
	// Workload is push, popack, mixed or read.
	Workload Workload
	// ReadPath is the path and query a read run GETs (read only); empty
	// means the queue's resource, /api/v1/resources/queues/{Queue}.
	ReadPath string
	// Conns is the number of concurrent connections (one request in flight
	// on each). Mixed splits them: half push, half pop and ack.
	Conns int
	// Batch is the number of messages per push request and the most asked
	// for by one pop.
	Batch int
	// Size is the size of each message payload in bytes: a realistic JSON
	// document (see Payloads).
	Size int
	// Queue is the queue name; with Queues > 1 it is the prefix of the names
	// Queue-0 ... Queue-(Queues-1).
	Queue string
	// Queues is how many queues requests are spread over.
	Queues int
	// Partitions is how many partitions (p0 ... p(N-1)) of each queue pushes
	// are spread over; 1 uses the queue's Default partition. One push
	// request goes to one partition.
	Partitions int
	// Groups is the number of consumer groups that pop (bench-g0 ...); each
	// consumes every message. 0 pops in queue mode (one shared cursor).
	Groups int
	// Duration ends the run; 0 with Messages set means "until Messages"
	// (still capped by MaxDuration), 0 without Messages means
	// DefaultDuration.
	Duration time.Duration
	// Messages ends the run once this many messages were pushed (push,
	// mixed) or acked (popack, summed over groups); 0 means no count limit.
	Messages int64
	// Rate paces pushes to this many messages per second in total (0: as
	// fast as the broker answers). Requests are scheduled evenly from the
	// start, so latency is measured at a known load: e.g. half of peak.
	Rate float64
	// Idle ends a popack run, or the popping side of a mixed run whose
	// pushers are done, when no message was delivered for this long (the
	// queues are drained).
	Idle time.Duration
	// Timeout bounds one request.
	Timeout time.Duration
	// Seed makes payloads and transaction ids reproducible; 0 picks one
	// from the clock.
	Seed uint64
}

// DefaultOptions returns the options of `queen bench` without flags.
func DefaultOptions() Options {
	return Options{
		URLs:       []string{"http://127.0.0.1:6632"},
		Workload:   Push,
		Conns:      32,
		Batch:      100,
		Size:       1024,
		Queue:      "bench",
		Queues:     1,
		Partitions: 16,
		Groups:     0,
		Idle:       time.Second,
		Timeout:    30 * time.Second,
	}
}

var queueName = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)

// Validate reports an option that cannot work.
func (o Options) Validate() error {
	if len(o.URLs) == 0 {
		return errors.New("bench: at least one --url is required")
	}
	for _, u := range o.URLs {
		if _, err := parseTarget(u, o.AllowRemote); err != nil {
			return err
		}
	}
	switch o.Workload {
	case Push, PopAck, Mixed, Read:
	default:
		return fmt.Errorf("bench: unknown workload %q (push, popack, mixed, read)", o.Workload)
	}
	if o.ReadPath != "" && (o.Workload != Read || !strings.HasPrefix(o.ReadPath, "/")) {
		return errors.New("bench: --path is for --workload read and starts with /")
	}
	switch {
	case o.Rate < 0:
		return errors.New("bench: --rate must not be negative")
	case o.Conns < 1 || o.Conns > MaxConns:
		return fmt.Errorf("bench: --conns must be in [1, %d]", MaxConns)
	case o.Workload == Mixed && o.Conns < 2:
		return errors.New("bench: mixed needs --conns of at least 2 (pushers and poppers)")
	case o.Batch < 1 || o.Batch > MaxBatch:
		return fmt.Errorf("bench: --batch must be in [1, %d]", MaxBatch)
	case o.Size < MinPayloadSize || o.Size > MaxPayloadSize:
		return fmt.Errorf("bench: --size must be in [%d, %d] bytes", MinPayloadSize, MaxPayloadSize)
	case !queueName.MatchString(o.Queue) || len(o.Queue) > 200:
		return fmt.Errorf("bench: --queue %q must match %s and be at most 200 bytes", o.Queue, queueName)
	case o.Queues < 1 || o.Queues > 10000:
		return errors.New("bench: --queues must be in [1, 10000]")
	case o.Partitions < 1 || o.Partitions > 100000:
		return errors.New("bench: --partitions must be in [1, 100000]")
	case o.Groups < 0 || o.Groups > 1000:
		return errors.New("bench: --groups must be in [0, 1000]")
	case o.Workload != Push && o.Groups > o.popConns():
		return fmt.Errorf("bench: %d groups need at least as many popping connections (have %d)", o.Groups, o.popConns())
	case o.Duration < 0 || o.Duration > MaxDuration:
		return fmt.Errorf("bench: --duration must be in [0, %s]", MaxDuration)
	case o.Messages < 0:
		return errors.New("bench: --messages must not be negative")
	case o.Idle <= 0 || o.Timeout <= 0:
		return errors.New("bench: --idle and --timeout must be positive")
	}
	return nil
}

// pushConns and popConns split the connections between the two roles.
func (o Options) pushConns() int {
	switch o.Workload {
	case Push:
		return o.Conns
	case Mixed:
		return o.Conns / 2
	}
	return 0
}

func (o Options) popConns() int {
	if o.Workload == Read {
		return 0
	}
	return o.Conns - o.pushConns()
}

// readPath is what a read run GETs.
func (o Options) readPath() string {
	if o.ReadPath != "" {
		return o.ReadPath
	}
	return "/api/v1/resources/queues/" + o.Queue
}

// runDuration is the run's time limit.
func (o Options) runDuration() time.Duration {
	switch {
	case o.Duration > 0:
		return o.Duration
	case o.Messages > 0:
		return MaxDuration
	}
	return DefaultDuration
}

// target is one parsed URL.
type target struct {
	base  string // scheme://host:port, no trailing slash
	addr  string // host:port
	isTLS bool
}

// parseTarget checks a base URL: http or https, a host, no path beyond
// "/", and a loopback host unless remote is allowed.
func parseTarget(raw string, remote bool) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("bench: bad --url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return target{}, fmt.Errorf("bench: --url %q must be http:// or https://", raw)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return target{}, fmt.Errorf("bench: --url %q must be a base URL (scheme://host:port)", raw)
	}
	host := u.Hostname()
	if !remote && !isLoopback(host) {
		return target{}, fmt.Errorf("bench: --url %q is not a loopback address; pass --allow-remote to drive it", raw)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return target{base: u.Scheme + "://" + u.Host, addr: net.JoinHostPort(host, port), isTLS: u.Scheme == "https"}, nil
}

// isLoopback reports whether host names this machine without a lookup:
// "localhost" or a loopback IP literal.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
