package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/analytics"
	"github.com/queenmq/queen/server/auth"
	"github.com/queenmq/queen/server/cors"
	"github.com/queenmq/queen/server/diskspace"
	"github.com/queenmq/queen/server/envelope"
	"github.com/queenmq/queen/server/listener"
	"github.com/queenmq/queen/server/memory"
	"github.com/queenmq/queen/server/relay"
	"github.com/queenmq/queen/server/spool"
)

// Options configures a Server. Zero fields take their defaults (see
// DefaultOptions).
type Options struct {
	// Addr is the address ListenAndServe listens on (default
	// "0.0.0.0:6632", docs/decisions.md C12).
	Addr string
	// MaxBodyBytes caps a request body (QUEEN_MAX_BODY_BYTES, default
	// 64 MiB); a larger body is answered 413 body_too_large.
	MaxBodyBytes int
	// MaxInflightBodyBytes caps the bytes of request bodies held at once,
	// all requests together (--max-inflight-body-bytes,
	// QUEEN_MAX_INFLIGHT_BODY_BYTES). A request whose body would take the
	// total past it is answered 503 overloaded with Retry-After, before
	// its body is read when it declares its length (a chunked body is
	// refused when it outgrows the room left). Default: 1/4 of the memory
	// the process may use (its cgroup's limit, else physical memory), at
	// least 2 × MaxBodyBytes and at most 1 GiB unless that floor is larger
	// (package memory says why). It may not be below MaxBodyBytes: the largest
	// body accepted could then never be read.
	MaxInflightBodyBytes int64
	// DefaultPopTimeout is the long-poll deadline of a pop that sends
	// wait=true without a usable timeout (DEFAULT_TIMEOUT, 30 s).
	DefaultPopTimeout time.Duration
	// MaxPopTimeout caps the long-poll deadline a client may ask for
	// (default 5 min).
	MaxPopTimeout time.Duration
	// ReadTimeout bounds reading one request, body included (default 60 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response (default 60 s).
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long (default
	// 2 min). A connection that has not sent its first request yet ends at
	// ReadTimeout.
	IdleTimeout time.Duration
	// MaxConns caps the HTTP connections open at once, all clients
	// together (--max-conns); the excess is closed at once and counted in
	// queen_http_conns_refused_total{reason="max_conns"}. Default: half of
	// the process's descriptor limit (listener.DefaultMaxConns says
	// why), so a flood of connections meets this cap before the node runs
	// out of descriptors.
	MaxConns int
	// MaxConnsPerIP caps the connections open at once from one client IP
	// (--max-conns-per-ip), counted in
	// queen_http_conns_refused_total{reason="max_conns_per_ip"}. Default:
	// half of MaxConns. Behind a proxy, whose address every client has,
	// set it to MaxConns.
	MaxConnsPerIP int
	// Version is reported by /health (default "dev").
	Version string
	// Logger receives request failures (500s with details, 503s) and, at
	// debug level, fasthttp's connection errors (default slog.Default()).
	Logger *slog.Logger
	// SpoolDir is where pushes received during push maintenance wait to be
	// replayed (docs/semantics.md §12). Empty: push maintenance answers 500.
	SpoolDir string
	// Metrics is the set the server registers its series in and that
	// /metrics/prometheus writes out; pass the process's shared set so one
	// scrape sees every layer (default: a private set).
	Metrics *metrics.Set
	// EncryptionKey is QUEEN_ENCRYPTION_KEY as given: 64 hex characters
	// (surrounding whitespace ignored), the AES-256-GCM key that seals the
	// payloads pushed to queues with encryptionEnabled (docs/semantics.md §11;
	// doc.go, "Encryption at rest"). Empty disables encryption at rest:
	// queues with the flag then store PLAINTEXT, with a warning when one is
	// configured. Any other value that is not 64 hex characters is refused
	// by Validate, so New fails and the node does not start (fail closed;
	// the error never quotes the key). Reads decrypt only the payloads this
	// broker sealed (their messages' sealed mark), never a payload by its
	// shape.
	EncryptionKey string
	// CORSOrigins lists the browser origins allowed to call the API
	// (--cors-origins). Empty or ["*"] allows any origin, as Queen does.
	// With a list, a request whose Origin is neither listed nor this
	// server's own host is refused with 403 origin_not_allowed, preflights
	// included, so a page elsewhere cannot drive the broker with a
	// browser's "simple" requests either.
	CORSOrigins []string
	// ClusterSecret guards the node-to-node routes (/internal/v1/...:
	// cluster join and leave). A request must carry it in the
	// X-Queen-Cluster-Secret header (compared in constant time), or an
	// admin token when JWT is on. EMPTY CLOSES THE CLUSTER PLANE: those
	// routes then answer 403 unless the caller holds an admin token.
	ClusterSecret string
	// TLS, when set, makes Serve and ListenAndServe speak HTTPS with it
	// (--tls-cert, --tls-key).
	TLS *tls.Config
	// Auth verifies JWTs (JWT_ENABLED and the other JWT_* settings, see
	// package auth); nil turns authentication off, as Queen's default is.
	// The server does not close it.
	Auth *auth.Verifier
	// RelayTLS, when set, is the client configuration for relays to the
	// leader: followers then reach the leader's HTTP API over HTTPS,
	// verifying its certificate with RelayTLS.RootCAs. Set it whenever the
	// nodes serve TLS.
	RelayTLS *tls.Config
	// Cluster is this node's path to the other nodes for commands (package
	// cluster), the one its cluster.Host forwards through; its Transport
	// carries the server's relays too, so it is made with ClusterSecret and
	// RelayTLS. Nil: the server makes its own of them (none without the
	// secret).
	Cluster *cluster.Client
	// Storage guards the free space of this node's data directories (its
	// store's and SpoolDir's filesystems; `queen serve` builds it from
	// --min-free-bytes). While a filesystem is below its reserve, the
	// routes that add data answer 507 insufficient_storage; pops, acks and
	// deletes go on. A follower also reports its state to the leader, which
	// then refuses data for the whole cluster (storage.go). Nil turns the
	// guard off. The server does not close it.
	Storage *diskspace.Guard
	// Analytics records the per-minute series of /api/v1/analytics
	// (package analytics); nil: the server makes its own. `queen serve` passes
	// one so that the Raft node can report its retention sweeps to it.
	Analytics *analytics.Analytics
}

// DefaultOptions returns the options a zero Options is completed with.
func DefaultOptions() Options {
	var o Options
	o.EnsureDefaults()
	return o
}

// EnsureDefaults fills every zero field with its default.
func (o *Options) EnsureDefaults() {
	if o.Addr == "" {
		o.Addr = "0.0.0.0:6632"
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 64 << 20
	}
	if o.MaxInflightBodyBytes == 0 {
		o.MaxInflightBodyBytes = memory.DefaultBudget(memory.Available(), o.MaxBodyBytes)
	}
	if o.DefaultPopTimeout == 0 {
		o.DefaultPopTimeout = 30 * time.Second
	}
	if o.MaxPopTimeout == 0 {
		o.MaxPopTimeout = 5 * time.Minute
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 60 * time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 60 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.MaxConns == 0 {
		o.MaxConns = listener.DefaultMaxConns(listener.DescriptorLimit())
	}
	if o.MaxConnsPerIP == 0 {
		o.MaxConnsPerIP = listener.DefaultMaxConnsPerIP(o.MaxConns)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.NewSet()
	}
}

// Validate reports an option that cannot work.
func (o Options) Validate() error {
	switch {
	case o.MaxBodyBytes < 0:
		return fmt.Errorf("%w: MaxBodyBytes must not be negative", engine.ErrInvalid)
	case o.MaxInflightBodyBytes < 0:
		return fmt.Errorf("%w: MaxInflightBodyBytes must not be negative", engine.ErrInvalid)
	case o.MaxInflightBodyBytes != 0 && o.MaxInflightBodyBytes < int64(o.MaxBodyBytes):
		return fmt.Errorf("%w: MaxInflightBodyBytes (%d) is below MaxBodyBytes (%d): the largest body accepted could never be read",
			engine.ErrInvalid, o.MaxInflightBodyBytes, o.MaxBodyBytes)
	case o.DefaultPopTimeout < 0 || o.MaxPopTimeout < 0:
		return fmt.Errorf("%w: pop timeouts must not be negative", engine.ErrInvalid)
	case o.DefaultPopTimeout > o.MaxPopTimeout:
		return fmt.Errorf("%w: DefaultPopTimeout exceeds MaxPopTimeout", engine.ErrInvalid)
	case o.MaxConns < 0 || o.MaxConnsPerIP < 0:
		return fmt.Errorf("%w: MaxConns and MaxConnsPerIP must not be negative", engine.ErrInvalid)
	case o.ReadTimeout < 0 || o.WriteTimeout < 0 || o.IdleTimeout < 0:
		return fmt.Errorf("%w: timeouts must not be negative", engine.ErrInvalid)
	case o.EncryptionKey != "":
		if _, err := envelope.ParseKey(o.EncryptionKey); err != nil {
			return err
		}
	}
	return nil
}

// Server is Queen's v1 HTTP API over a Broker.
type Server struct {
	broker   Broker
	groups   groupView // the broker's groups (broker.go)
	opts     Options
	log      *slog.Logger
	http     *fasthttp.Server
	relay    *relay.Requests // relays whole requests to the leader; node-to-node posts
	cluster  *cluster.Client // sends commands to other nodes; nil without the cluster secret
	spool    *spool.Spool    // pushes held during push maintenance; nil without SpoolDir
	stop     chan struct{}   // closed by Shutdown: stops the spool's drain and the storage reports
	drained  chan struct{}   // closed when the drain loop has stopped
	loops    sync.WaitGroup  // the storage report loop
	stopOnce sync.Once
	router   router
	m        *brokerMetrics
	prop     *relay.TimedProposer // the broker's Propose, timed (package relay)
	send     raft.Proposer        // local or leader: a client's commands (sender)
	options  *routeStats          // OPTIONS preflights
	misses   *routeStats          // requests no route matched
	started  time.Time
	// ctx is the context of every broker call. Handlers never pass the
	// RequestCtx itself: a broker may keep a context after the call
	// returns, and fasthttp recycles RequestCtx values.
	ctx context.Context
	// crypt seals and opens payloads; nil when no usable key is configured.
	crypt *envelope.Cipher
	// cors is Options.CORSOrigins, compiled.
	cors cors.Policy
	// auth is Options.Auth, or a disabled verifier.
	auth *auth.Verifier
	// budget bounds the bytes of request bodies held at once
	// (Options.MaxInflightBodyBytes; inflight.go).
	budget *memory.Budget
	// reclaim returns body bytes to the budget once they are garbage, and
	// memory to the operating system after a burst (memory.Reclaimer).
	reclaim *memory.Reclaimer
	// storage is the free-space state: the other nodes' reports (storage.go).
	storage *storageState
	// an is the analytics recorder (package analytics; analytics.go).
	an *analytics.Analytics
	// reads makes reads linearizable (package relay); nil for a broker
	// without replicas.
	reads *relay.Reads
	// queueReads says a read of one queue waits for the directory and
	// the queue's group alone (readBarrier): the broker spreads queues
	// over more than one data group.
	queueReads bool
	// conns caps the connections open (Options.MaxConns, MaxConnsPerIP;
	// package listener).
	conns *listener.Limiter
}

// New builds a server over b. It does not listen yet: see Serve and
// ListenAndServe.
func New(b Broker, opts Options) (*Server, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil Broker", engine.ErrInvalid)
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		broker:  b,
		groups:  groupsOf(b),
		opts:    opts,
		log:     opts.Logger,
		m:       newBrokerMetrics(opts.Metrics),
		options: newRouteStats(opts.Metrics, "options"),
		misses:  newRouteStats(opts.Metrics, "unmatched"),
		started: time.Now(),
		ctx:     context.Background(),
		budget:  memory.NewBudget(opts.MaxInflightBodyBytes),
		storage: newStorageState(opts.Metrics),
		conns:   listener.NewLimiter(opts.MaxConns, opts.MaxConnsPerIP, opts.Logger, opts.Metrics),
	}
	s.prop = relay.NewTimedProposer(b, opts.Metrics)
	if rb, ok := b.(Replicated); ok {
		s.reads = newReads(s, rb)
	}
	s.queueReads = len(s.groups.list()) > 2 // the directory and two data groups or more
	opts.Metrics.GetOrCreateGauge(`queen_http_inflight_body_bytes`, func() float64 { return float64(s.budget.Held()) })
	crypt, err := newCipherFromOptions(opts)
	if err != nil {
		return nil, err
	}
	s.crypt = crypt
	if s.cors, err = cors.Compile(opts.CORSOrigins); err != nil {
		return nil, err
	}
	// One transport to the other nodes (package cluster) carries the
	// commands and the relayed requests: the cluster client's when the
	// node is given one. A push answers about 230 bytes per item, and an
	// item can be 13 bytes of JSON (`{"queue":"q"}`): a relayed answer may
	// be some 18 times its request's body, and 32 times is allowed.
	var transport *cluster.Transport
	if opts.Cluster != nil {
		transport = opts.Cluster.Transport()
	} else {
		transport = cluster.NewTransport(cluster.TransportOptions{Secret: opts.ClusterSecret, TLS: opts.RelayTLS,
			MaxResponseBodySize: opts.MaxBodyBytes * 32})
	}
	s.relay = relay.NewRequests(relay.Options{NodeID: s.nodeID, Transport: transport,
		Reads: s.reads, Metrics: opts.Metrics, Logger: opts.Logger})
	if s.cluster = opts.Cluster; s.cluster == nil && opts.ClusterSecret != "" {
		s.cluster = cluster.New(cluster.Options{NodeID: b.Status().ID, Secret: opts.ClusterSecret, Transport: transport,
			Refusal: Refusal, Metrics: opts.Metrics})
	}
	s.send = s.sender(b)
	s.stop, s.drained = make(chan struct{}), make(chan struct{})
	s.reclaim = memory.NewReclaimer(s.budget, s.stop)
	if opts.SpoolDir != "" {
		sp, err := spool.Open(opts.SpoolDir)
		if err != nil {
			return nil, err
		}
		s.spool = sp
	}
	if m, ok := b.(Maintainer); ok && s.spool != nil {
		go s.drainLoop(m, s.stop)
	} else {
		close(s.drained)
	}
	if s.auth = opts.Auth; s.auth == nil {
		if s.auth, err = auth.New(auth.Options{Logger: opts.Logger}); err != nil {
			return nil, err
		}
	}
	table := s.routeTable()
	if err := checkRoutes(table); err != nil {
		return nil, err
	}
	for _, r := range table {
		s.router.add(&endpoint{route: r, stats: newRouteStats(opts.Metrics, r.name), queueOf: readsOneQueue[r.name]})
	}
	s.http = &fasthttp.Server{
		Handler:                      s.handle,
		ErrorHandler:                 s.readError,
		Name:                         "queen",
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		MaxRequestBodySize:           opts.MaxBodyBytes,
		ReadBufferSize:               8 << 10, // request line + headers (bearer tokens can be large)
		StreamRequestBody:            true,    // the handler reads bodies itself, under the budget (takeBody)
		DisablePreParseMultipartForm: true,
		ReadTimeout:                  opts.ReadTimeout,
		WriteTimeout:                 opts.WriteTimeout,
		IdleTimeout:                  opts.IdleTimeout,
		// The listener admits at most MaxConns (package listener): fasthttp
		// must serve every one of them.
		Concurrency:     opts.MaxConns,
		CloseOnShutdown: true,
		Logger:          fasthttpLogger{opts.Logger},
	}
	if opts.Storage != nil {
		s.loops.Add(1)
		go s.reportLoop(s.stop)
	}
	s.startAnalytics()
	return s, nil
}

// newCipherFromOptions builds the payload cipher from Options.EncryptionKey:
// nil (encryption disabled) when there is none, an error when it is
// malformed. A malformed key never degrades to "disabled": queues that
// asked for encryption would silently store plaintext.
func newCipherFromOptions(opts Options) (*envelope.Cipher, error) {
	if opts.EncryptionKey == "" {
		return nil, nil
	}
	key, err := envelope.ParseKey(opts.EncryptionKey)
	if err != nil {
		return nil, err
	}
	c, err := envelope.NewCipher(key, opts.Metrics)
	if err != nil {
		return nil, err
	}
	opts.Logger.Info("encryption at rest enabled (AES-256-GCM)")
	return c, nil
}

// Serve answers requests on ln until Shutdown, over TLS when Options.TLS
// is set. It returns nil after a Shutdown; any other return is an error
// the server cannot outlive (errors accepting a connection that pass, such
// as running out of descriptors, are retried: package listener).
func (s *Server) Serve(ln net.Listener) error {
	s.runAnalytics()
	// Under TLS: the caps count TCP connections, and refuse them before a
	// handshake is spent on them.
	ln = s.conns.Listen(ln)
	if s.opts.TLS != nil {
		ln = tls.NewListener(ln, s.opts.TLS)
	}
	return s.http.Serve(ln)
}

// ListenAndServe listens on Options.Addr and serves.
func (s *Server) ListenAndServe() error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("server: listen: %w", err)
	}
	return s.Serve(ln)
}

// Shutdown stops accepting connections, wakes parked long-polls (they answer
// 204) and waits for in-flight requests until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	// Requests a broker of groups holds while their queue moves answer
	// now, not when the move ends (cluster.Host.StopWaiting).
	if w, ok := s.broker.(interface{ StopWaiting() }); ok {
		w.StopWaiting()
	}
	err := s.http.ShutdownWithContext(ctx)
	<-s.drained
	s.loops.Wait()
	return err
}

// handle is fasthttp's handler: CORS, routing, panics, metrics.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	s.m.requests.Add(1)
	s.an.RequestStarted()
	defer s.an.RequestDone()
	allowed := s.cors.Apply(ctx)
	stats := s.misses
	defer func() {
		if v := recover(); v != nil {
			s.writeError(ctx, fmt.Errorf("server: panic: %v", v))
		}
		stats.observe(ctx.Response.StatusCode(), start)
	}()
	if !allowed {
		s.writeError(ctx, errOriginNotAllowed)
		return
	}
	if ctx.IsOptions() {
		stats = s.options
		ctx.SetStatusCode(fasthttp.StatusNoContent)
		return
	}
	var p params
	ep, allow, err := s.router.lookup(ctx.Method(), ctx.URI().PathOriginal(), &p)
	if err != nil {
		if allow != "" {
			ctx.Response.Header.Set("Allow", allow)
		}
		s.writeError(ctx, err)
		return
	}
	stats = ep.stats
	if err := s.admit(ctx, ep.level, &p); err != nil {
		s.writeError(ctx, err)
		return
	}
	if relay.Expired(ctx) {
		s.writeError(ctx, errForwardExpired)
		return
	}
	if ep.read == linearizable {
		if err := s.readBarrier(ctx, ep, &p); err != nil {
			if !errors.Is(err, errReadIndexRefused) || !s.forward(ctx) {
				s.writeError(ctx, err)
			}
			return
		}
	}
	if ep.read == proposes && (p.node || relay.Forwarded(ctx)) {
		// Another node relayed it: it answers its client once it has
		// applied as far as this node has when the command is answered.
		defer s.reads.Stamp(&ctx.Response.Header)
	}
	if ep.disk == addsData {
		// Before the body is read: a refused body is never held.
		release, err := s.admitData(max(int64(ctx.Request.Header.ContentLength()), 0))
		if err != nil {
			s.writeError(ctx, err)
			s.lingerUnread(ctx)
			return
		}
		defer release()
	}
	held, err := s.takeBody(ctx)
	if err != nil {
		if errors.Is(err, errOverloaded) {
			s.m.overloaded.Inc()
			s.reclaim.Refused()
		}
		s.writeError(ctx, err)
		if errors.Is(err, errOverloaded) || errors.Is(err, errBodyTooLarge) {
			s.lingerUnread(ctx)
		}
		return
	}
	if held > 0 {
		defer s.bodyDone(ctx, held)
	}
	ep.handle(s, ctx, &p)
}

// bodyDone ends a request's hold on its body: the request lets go of the
// buffer, which a keep-alive connection would otherwise keep until its next
// request, and its bytes go back to the budget (a large body's once it is
// collected: memory.Reclaimer).
func (s *Server) bodyDone(ctx *fasthttp.RequestCtx, held int64) {
	ctx.Request.ResetBody()
	s.reclaim.Ended(held)
}

// readError answers a request fasthttp could not read (malformed request,
// headers too large, read timeout) with the docs/decisions.md C2 body. Bodies are read, and
// refused when too large, by takeBody.
func (s *Server) readError(ctx *fasthttp.RequestCtx, err error) {
	s.cors.Apply(ctx)
	s.writeError(ctx, fasthttpError(err))
	s.misses.observe(ctx.Response.StatusCode(), time.Now())
}

// noContent answers 204 with no body.
func noContent(ctx *fasthttp.RequestCtx) {
	ctx.Response.ResetBody()
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// fasthttpLogger writes fasthttp's log lines through slog at debug level:
// they report client misbehaviour (resets, timeouts), not broker faults.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("fasthttp: " + fmt.Sprintf(format, args...))
	}
}

// checkRoutes refuses a route table in which a route does not declare the
// access level its callers need or whether it adds data: a route added
// without thinking about either must not start, rather than start open.
func checkRoutes(table []route) error {
	for _, r := range table {
		if r.level == auth.Unset || r.level > auth.Cluster {
			return fmt.Errorf("%w: route %s %s declares no access level", engine.ErrInvalid, r.method, r.pattern)
		}
		if r.disk == diskUnset || r.disk > perCommand {
			return fmt.Errorf("%w: route %s %s does not say whether it adds data", engine.ErrInvalid, r.method, r.pattern)
		}
		if r.read == readUnset || r.read > proposes {
			return fmt.Errorf("%w: route %s %s does not say how fresh what it reads is", engine.ErrInvalid, r.method, r.pattern)
		}
	}
	return checkQueueReads(table)
}
