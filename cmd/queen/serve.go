package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"

	nodes "github.com/queenmq/queen/cluster" // the test harness has a type cluster
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/analytics"
	"github.com/queenmq/queen/server/auth"
	"github.com/queenmq/queen/server/diskspace"
	"github.com/queenmq/queen/server/meter"
	"github.com/queenmq/queen/server/relay"
)

// serveConfig is everything `queen serve` reads from flags and the
// environment.
type serveConfig struct {
	data      string
	http      string
	advertise string
	nodeID    string
	raftAddr  string
	peers     []raft.Peer
	join      string
	// rejoin is --join as given to a founder (one --peers lists), which
	// drops join: it joins after all when its store is empty and the
	// founders run the cluster without it (raft.ErrNotMember).
	rejoin    string
	pprof     string
	logLevel  slog.Level
	logFormat string
	maxBody   int
	// maxInflight is --max-inflight-body-bytes; 0 takes the server's
	// default (a fraction of memory).
	maxInflight int64
	// maxConns and maxConnsPerIP are --max-conns and --max-conns-per-ip;
	// 0 takes the server's default (from the descriptor limit).
	maxConns, maxConnsPerIP int
	// minFree is --min-free-bytes: the free space each filesystem of the
	// data directory keeps; 0 turns the guard off.
	minFree uint64
	// encryptionKey is QUEEN_ENCRYPTION_KEY (environment only, never a
	// flag: a flag would show the key in the process list).
	encryptionKey string
	// raftTLS is the Raft transport's mutual TLS (--raft-tls-cert, -key,
	// -ca), nil without them.
	raftTLS *tls.Config
	// raftCA is --raft-tls-ca's path: relays and --join also trust it.
	raftCA string
	// clusterSecret is --cluster-secret, or the contents of
	// --cluster-secret-file without a trailing newline.
	clusterSecret string
	// httpTLS serves the API over HTTPS (--tls-cert, --tls-key), nil
	// without them; relayTLS is then how this node verifies the others'
	// HTTPS when it relays to the leader or joins (--tls-ca, --raft-tls-ca
	// and the system roots).
	httpTLS, relayTLS *tls.Config
	// corsOrigins is --cors-origins, split on commas.
	corsOrigins []string
	// auth is JWT_ENABLED and the other JWT_* variables.
	auth auth.Options
	// Raft tuning, for operators and for the process-level tests.
	snapshotThreshold uint64
	snapshotInterval  time.Duration
	trailingLogs      uint64
	retention         time.Duration
	// groups is --groups: the Raft groups queues are spread over
	// (ARCHITECTURE.md, "Scale-out"); 1 runs one group, as before there
	// were groups.
	groups int
	// replaceAfter is --replace-after: how long a node may be unreachable
	// before its replicas are re-created on others (cluster/rebalance.go).
	replaceAfter time.Duration
	// retireHold is --retire-hold: how long a replica moved away from
	// this node is kept before its disk is freed (cluster/placed.go).
	retireHold time.Duration
	// balance is --balance: the directory's leader moves queues from the
	// hottest group to the coolest (cluster/balance.go).
	balance bool
	// replicas is --replicas: R, the voters each data group has (0 when
	// unset: replicaCount picks it).
	replicas int
	// founders is how many nodes --peers lists, before a joiner drops the
	// list: what --replicas is checked against.
	founders int
}

func parseServe(args []string, getenv func(string) string) (serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	defHTTP := "0.0.0.0:6632"
	if h, p := getenv("HOST"), getenv("PORT"); h != "" || p != "" {
		defHTTP = net.JoinHostPort(cmp.Or(h, "0.0.0.0"), cmp.Or(p, "6632"))
	}
	var c serveConfig
	var peers, level, tlsCert, tlsKey, tlsCA, secretFile, httpCert, httpKey, httpCA, cors, minFree string
	fs.StringVar(&c.data, "data", "./data", "data directory")
	fs.StringVar(&c.http, "http", defHTTP, "HTTP listen address host:port (also Queen's HOST and PORT)")
	fs.StringVar(&c.advertise, "advertise", "", "HTTP address other nodes reach this one at (default: --http, with 0.0.0.0 as 127.0.0.1)")
	fs.StringVar(&c.nodeID, "node-id", "node1", "this node's id, unique in the cluster for all time")
	fs.StringVar(&c.raftAddr, "raft", "", "Raft TCP address host:port; empty runs a single node without network replication")
	fs.StringVar(&peers, "peers", "", "static membership id@raftHost:raftPort,... including this node; the first start bootstraps")
	fs.StringVar(&tlsCert, "raft-tls-cert", "", "PEM certificate of this node for mutual TLS on the Raft transport, naming its --raft host; with --raft-tls-key and --raft-tls-ca")
	fs.StringVar(&tlsKey, "raft-tls-key", "", "PEM private key of --raft-tls-cert")
	fs.StringVar(&tlsCA, "raft-tls-ca", "", "PEM certificate of the CA that signed every node's Raft certificate")
	fs.StringVar(&c.clusterSecret, "cluster-secret", "", "secret every node of the cluster shares; Raft connections must prove it (prefer --cluster-secret-file, which keeps it out of the process list)")
	fs.StringVar(&secretFile, "cluster-secret-file", "", "file holding the cluster secret; a trailing newline is dropped")
	fs.StringVar(&httpCert, "tls-cert", "", "PEM certificate to serve the HTTP API over HTTPS, naming the host clients and other nodes use; with --tls-key")
	fs.StringVar(&httpKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&httpCA, "tls-ca", "", "PEM CA certificate this node trusts for the other nodes' HTTPS (relays, --join), besides the system roots and --raft-tls-ca")
	fs.StringVar(&cors, "cors-origins", "*", "comma-separated browser origins allowed to call the API, scheme://host[:port]; * allows any, as Queen")
	fs.StringVar(&c.join, "join", "", "HTTP URL of a running cluster node to join at first start, instead of bootstrapping; with --peers, only a node --peers does not list joins")
	def := raft.DefaultOptions()
	fs.Uint64Var(&c.snapshotThreshold, "snapshot-threshold", def.SnapshotThreshold, "Raft log entries between snapshots")
	fs.DurationVar(&c.snapshotInterval, "snapshot-interval", def.SnapshotInterval, "how often Raft checks whether a snapshot is due")
	fs.Uint64Var(&c.trailingLogs, "trailing-logs", def.TrailingLogs, "Raft log entries kept after a snapshot for slow followers")
	fs.DurationVar(&c.retention, "retention-interval", 5*time.Second, "how often the leader sweeps retention and eviction (0 disables)")
	fs.IntVar(&c.groups, "groups", 1, "Raft groups the queues are spread over, each with its own leader; read at the cluster's first start, and every node must give the same. More than 1 needs --raft, and the cluster secret on several nodes")
	fs.BoolVar(&c.balance, "balance", true, "with --groups above 1: move queues from the busiest Raft group to the idlest when one carries 1.5x the other's msgs/s and 500 msgs/s more for a minute, one queue every 5 minutes at most (each move stalls the queue's writers while it is copied)")
	fs.DurationVar(&c.replaceAfter, "replace-after", 5*time.Minute, "with --replicas below the node count: how long a node may be unreachable before its replicas are re-created on the other nodes and it is removed (0: never)")
	fs.DurationVar(&c.retireHold, "retire-hold", 30*time.Second, "with --replicas below the node count: how long a replica moved away from this node waits, once its removal has committed, before it is closed and its disk freed (twice this in all)")
	fs.IntVar(&c.replicas, "replicas", 0, "R, the voters each data group has with --groups above 1: each group's replicas are on R of the nodes, so nodes past R add capacity; read at the cluster's first start; a group has min(nodes, R) voters, gaining them as nodes join (default 3)")
	fs.StringVar(&c.pprof, "pprof", "", "serve Go's pprof profiles on this host:port (off when empty; keep it on loopback)")
	fs.StringVar(&level, "log-level", "info", "debug, info, warn or error; debug also shows Raft's elections and snapshots")
	fs.StringVar(&c.logFormat, "log-format", "text", "text (key=value lines) or json (one object a line)")
	fs.IntVar(&c.maxBody, "max-body-bytes", 64<<20, "largest request body accepted")
	fs.StringVar(&minFree, "min-free-bytes", diskspace.FormatBytes(diskspace.DefaultMinFreeBytes), "free space kept on each filesystem of --data: below it, writes that add data answer 507 while pops, acks and deletes go on; bytes or KiB/MiB/GiB/TiB, 0 disables")
	fs.Int64Var(&c.maxInflight, "max-inflight-body-bytes", 0, "bytes of request bodies held at once, all requests together; past it a request is answered 503 overloaded before its body is read. 0: 1/4 of the memory available (cgroup limit, else RAM), between 2 × --max-body-bytes and 1 GiB")
	fs.IntVar(&c.maxConns, "max-conns", 0, "HTTP connections open at once, all clients together; past it a connection is closed at once. 0: half of the descriptor limit (ulimit -n), leaving the rest to the store and Raft")
	fs.IntVar(&c.maxConnsPerIP, "max-conns-per-ip", 0, "HTTP connections open at once from one client IP; past it a connection is closed at once. 0: half of --max-conns (behind a proxy, set it to --max-conns)")
	// The payload key has no flag: it stays out of the process list.
	c.encryptionKey = getenv("QUEEN_ENCRYPTION_KEY")
	if err := parseEnvFlags(fs, args, getenv); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var badReplicas bool // given (flag or variable), and below 1: 0 is how unset reads
	fs.Visit(func(f *flag.Flag) { badReplicas = badReplicas || f.Name == "replicas" && c.replicas < 1 })
	if badReplicas {
		return c, fmt.Errorf("bad --replicas %d: want 1 or more", c.replicas)
	}
	if err := c.logLevel.UnmarshalText([]byte(level)); err != nil {
		return c, fmt.Errorf("bad --log-level %q", level)
	}
	if c.maxConns < 0 || c.maxConnsPerIP < 0 {
		return c, fmt.Errorf("bad --max-conns or --max-conns-per-ip: want 0 (the default) or more")
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return c, fmt.Errorf("bad --log-format %q: want text or json", c.logFormat)
	}
	var err error
	if c.minFree, err = parseBytes(minFree); err != nil {
		return c, fmt.Errorf("bad --min-free-bytes %q: %v", minFree, err)
	}
	if _, _, err := net.SplitHostPort(c.http); err != nil {
		return c, fmt.Errorf("bad --http %q: %v", c.http, err)
	}
	if c.advertise == "" {
		host, port, _ := net.SplitHostPort(c.http)
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		c.advertise = net.JoinHostPort(host, port)
	}
	if c.peers, err = parsePeers(peers); err != nil {
		return c, err
	}
	if err := c.loadRaftTrust(tlsCert, tlsKey, tlsCA, secretFile); err != nil {
		return c, err
	}
	if err := c.loadHTTPTrust(httpCert, httpKey, httpCA); err != nil {
		return c, err
	}
	c.corsOrigins = strings.Split(cors, ",")
	if c.auth, err = auth.OptionsFromEnv(getenv); err != nil {
		return c, err
	}
	c.founders = len(c.peers)
	if c.join != "" && len(c.peers) > 0 {
		// One set of arguments for every replica (a StatefulSet's
		// template): the nodes --peers lists found the cluster, any other
		// joins it. Scaling past them adds joiners.
		founder := false
		for _, p := range c.peers {
			founder = founder || p.ID == c.nodeID
		}
		if founder {
			c.rejoin, c.join = c.join, ""
		} else {
			c.peers = nil
		}
	}
	if c.join != "" && c.raftAddr == "" {
		return c, fmt.Errorf("--join needs --raft")
	}
	if c.join != "" && c.clusterSecret == "" {
		return c, fmt.Errorf("--join needs the cluster secret (--cluster-secret-file, --cluster-secret or QUEEN_CLUSTER_SECRET): the cluster refuses anonymous joins")
	}
	if len(c.peers) > 0 && c.raftAddr == "" {
		for _, p := range c.peers {
			if p.ID == c.nodeID {
				c.raftAddr = p.Addr
			}
		}
		if c.raftAddr == "" {
			return c, fmt.Errorf("--peers does not list --node-id %q; pass --raft", c.nodeID)
		}
	}
	if err := c.checkGroups(); err != nil {
		return c, err
	}
	if c.raftTLS != nil && c.raftAddr == "" {
		return c, fmt.Errorf("--raft-tls-cert, --raft-tls-key and --raft-tls-ca protect the Raft transport: they need --raft or --peers")
	}
	return c, nil
}

// checkGroups refuses --groups the node cannot run: groups share the Raft
// listener, so they need --raft; and nodes relay commands to each other's
// groups, which takes the cluster secret (--join needs it already).
func (c *serveConfig) checkGroups() error {
	switch {
	case c.groups < 1:
		return fmt.Errorf("bad --groups %d: want 1 or more", c.groups)
	case c.retireHold <= 0:
		return fmt.Errorf("bad --retire-hold %v: want a duration above 0", c.retireHold)
	case c.groups == 1 && c.replicas != 0 && c.replicas != max(c.founders, 1):
		return fmt.Errorf("--replicas %d needs --groups above 1: one group is on every node (%d here)", c.replicas, max(c.founders, 1))
	case c.groups == 1:
		return nil
	case c.raftAddr == "":
		return fmt.Errorf("--groups %d needs --raft (or --peers): the groups share the Raft listener", c.groups)
	case len(c.peers) > 1 && c.clusterSecret == "":
		return fmt.Errorf("--groups %d on several nodes needs the cluster secret (--cluster-secret-file, --cluster-secret or QUEEN_CLUSTER_SECRET): nodes relay commands to each other's groups", c.groups)
	}
	return nil
}

// replicaCount is R as the Host takes it (cluster.HostOptions.Replicas, read
// at the cluster's first start and recorded in the directory): --replicas
// when given, else 3 on a founder's first start (no Raft log under --data
// yet). R above the founders is fine: each group starts on every founder
// and gains voters as nodes join, up to R, so a group has min(N, R) voters
// and a cluster grown by --join from one node adds capacity past R nodes.
// It is 0, every group on every node, for a joiner (the directory holds
// the cluster's R), and by default on a node started before: a cluster
// from before --replicas does not shed voters by being restarted with a
// newer binary (--replicas given there records R).
func (c *serveConfig) replicaCount() int {
	switch {
	case c.groups == 1 || c.join != "":
		return 0 // a joiner takes the cluster's R from its directory
	case c.replicas > 0:
		return c.replicas
	}
	if _, err := os.Stat(filepath.Join(c.data, "raft")); err == nil {
		return 0
	}
	return defaultReplicas
}

// defaultReplicas is R when --replicas is not given: three voters a group
// survive one node's loss and leave room for a second during a repair or
// an upgrade, as Kafka's and CockroachDB's default replication of 3 does.
const defaultReplicas = 3

// parseBytes parses a size: a number of bytes, or a number with a binary
// unit (KiB, MiB, GiB, TiB, or K, M, G, T; any case).
func parseBytes(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(s)
	}
	n, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a number of bytes, optionally with KiB, MiB, GiB or TiB")
	}
	shift := map[string]uint{"": 0, "b": 0, "k": 10, "kib": 10, "m": 20, "mib": 20, "g": 30, "gib": 30, "t": 40, "tib": 40}
	sh, ok := shift[strings.ToLower(strings.TrimSpace(s[i:]))]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q: use KiB, MiB, GiB or TiB", strings.TrimSpace(s[i:]))
	}
	if n > (1<<64-1)>>sh {
		return 0, fmt.Errorf("too large")
	}
	return n << sh, nil
}

// parsePeers parses id@host:port,... (--peers).
func parsePeers(list string) ([]raft.Peer, error) {
	var peers []raft.Peer
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		id, addr, ok := strings.Cut(p, "@")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("bad --peers entry %q: want id@host:port", p)
		}
		peers = append(peers, raft.Peer{ID: id, Addr: addr})
	}
	return peers, nil
}

// loadRaftTrust loads the Raft transport's TLS files (all three or none)
// and the cluster secret's file.
func (c *serveConfig) loadRaftTrust(cert, key, ca, secretFile string) error {
	switch n := btoi(cert != "") + btoi(key != "") + btoi(ca != ""); n {
	case 0:
	case 3:
		conf, err := raft.LoadTLS(cert, key, ca)
		if err != nil {
			return err
		}
		c.raftTLS, c.raftCA = conf, ca
	default:
		return fmt.Errorf("--raft-tls-cert, --raft-tls-key and --raft-tls-ca go together: %d of the 3 are set", n)
	}
	var err error
	c.clusterSecret, err = secretFrom(c.clusterSecret, secretFile)
	return err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func serve(args []string) error {
	// From the first moment: a SIGTERM while the stores open (seconds, with
	// several groups or a long log to replay, or as long as a full disk
	// lasts) stops the node at once, with status 0: nothing has been
	// answered yet, and the stores survive any stop. Before, the default
	// action killed it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	c, err := parseServe(args, os.Getenv)
	if err != nil {
		return err
	}
	log := newLogger(os.Stderr, c.logFormat, c.logLevel)
	// The first line: from here a SIGTERM stops the node cleanly (one that
	// arrives before the process reaches serve is the default action's).
	log.Info("starting", "version", version, "pid", os.Getpid())
	serving := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			log.Info("stopped before serving", "signal", sig.String())
			os.Exit(0)
		case <-serving:
		}
	}()
	ms := metrics.NewSet()
	sopts := server.Options{
		Addr: c.http, MaxBodyBytes: c.maxBody, MaxInflightBodyBytes: c.maxInflight, Version: version, Logger: log, Metrics: ms,
		MaxConns: c.maxConns, MaxConnsPerIP: c.maxConnsPerIP,
		SpoolDir:      filepath.Join(c.data, "spool"),
		EncryptionKey: c.encryptionKey,
		CORSOrigins:   c.corsOrigins,
		ClusterSecret: c.clusterSecret,
		TLS:           c.httpTLS,
		RelayTLS:      c.relayTLS,
	}
	// Refuse bad server options (a malformed QUEEN_ENCRYPTION_KEY) before
	// the data directory is opened: the node must not start at all.
	if err := sopts.Validate(); err != nil {
		return err
	}

	opts := raft.DefaultOptions()
	opts.ID = c.nodeID
	opts.Dir = c.data
	opts.HTTPAddr = c.advertise
	opts.Version = version
	opts.Logger = log
	opts.Peers = c.peers
	opts.SnapshotThreshold = c.snapshotThreshold
	opts.SnapshotInterval = c.snapshotInterval
	opts.TrailingLogs = c.trailingLogs
	opts.RetentionInterval = c.retention
	if c.raftAddr == "" {
		// A single node needs no network transport: it is a single voter
		// on the same code path.
		opts.Transport = raft.NewLocalTransport(c.nodeID)
		opts.Bootstrap = true
		// Alone, the node waits one heartbeat timeout before electing
		// itself: keep that short so a restart serves at once.
		opts.HeartbeatTimeout = 100 * time.Millisecond
		opts.ElectionTimeout = 100 * time.Millisecond
		opts.LeaderLeaseTimeout = 100 * time.Millisecond
	} else {
		opts.RaftAddr = c.raftAddr
		opts.Bootstrap = len(c.peers) == 0 && c.join == ""
		opts.TLS = c.raftTLS
		opts.ClusterSecret = c.clusterSecret
	}
	c.auth.Logger = log
	verifier, err := auth.New(c.auth)
	if err != nil {
		return err
	}
	defer verifier.Close()
	sopts.Auth = verifier
	warnExposed(log, c)
	// The analytics hear the leader's retention sweeps from the node and
	// read the engine's store figures (package server/analytics): group 1's
	// when queues are spread over groups and this node holds it, else the
	// directory's (hostBroker.Engine).
	var node broker
	an := analytics.New(analytics.Options{Store: func() (engine.StoreStats, error) { return node.Engine().StoreStats() }})
	opts.OnSweep = an.RecordSweep
	opts.OnEntry = relay.EntryMetrics(ms)
	sopts.Analytics = an
	// The node-to-node path for commands (package cluster): a Host
	// forwards through it the parts of commands other nodes' groups must
	// propose. Without the cluster secret there is none.
	eff := sopts
	eff.EnsureDefaults()
	fwd := nodes.New(nodes.Options{NodeID: c.nodeID, Secret: c.clusterSecret, TLS: c.relayTLS,
		MaxResponseBodySize: eff.MaxBodyBytes * 32, Refusal: server.Refusal, Metrics: ms})
	sopts.Cluster = fwd
	if fwd != nil {
		// The cluster version (raft/version.go): the other nodes' are
		// read from their /health, and a follower relays its own address.
		opts.Versions, opts.Forward = fwd, fwd
	}
	if c.join != "" {
		// A wrong secret is a mistake to say at once, before --data is
		// made: the join would be refused for ever.
		if err := joinAllowed(c.join, c.clusterSecret, c.relayTLS); err != nil {
			return err
		}
		opts.JoinMembers = func() ([]string, string, error) { return clusterMembers(c.join, c.relayTLS) }
	}
	replicas := c.replicaCount() // before the open makes --data's Raft log
	node, err = openBroker(opts, c, replicas, fwd, ms)
	if errors.Is(err, raft.ErrNotMember) && c.rejoin != "" && c.clusterSecret != "" {
		// A founder whose old store was removed from the cluster (queen
		// leave --force after its disk was lost) comes back as a new member.
		log.Info("this node's store is empty and the cluster runs without it: joining as a new member", "via", c.rejoin, "why", err)
		// It takes the cluster's id from --join's /health, as a joiner does.
		opts.Peers, opts.Bootstrap, c.join, replicas = nil, false, c.rejoin, 0
		opts.JoinMembers = func() ([]string, string, error) { return clusterMembers(c.join, c.relayTLS) }
		node, err = openBroker(opts, c, replicas, fwd, ms)
	}
	if err != nil {
		return err
	}
	if sopts.Storage, err = storageGuard(log, c); err != nil {
		node.Close()
		return err
	}
	srv, err := server.New(node, sopts)
	if err != nil {
		node.Close()
		return err
	}
	ln, err := net.Listen("tcp", c.http)
	if err != nil {
		node.Close()
		return fmt.Errorf("listen: %w", err)
	}
	log.Info("queen serving", "http", ln.Addr().String(), "data", c.data, "node", c.nodeID,
		"raft", c.raftAddr, "peers", len(c.peers), "groups", c.groups, "replicas", replicas, "maxInflightBodyBytes", eff.MaxInflightBodyBytes,
		"maxConns", eff.MaxConns, "maxConnsPerIP", eff.MaxConnsPerIP, "version", version)

	if c.pprof != "" {
		go servePprof(log, c.pprof)
	}
	errc := make(chan error, 1)
	go func() { errc <- serveFailure(srv.Serve(ln)) }()
	if c.join != "" {
		applied := func() uint64 { return node.Status().Applied }
		go joinCluster(log, c.join, c.nodeID, c.raftAddr, c.clusterSecret, c.relayTLS, applied, func(err error) {
			select {
			case errc <- err:
			default: // the server has stopped already: that is the error
			}
		})
	}
	close(serving)
	served := awaitStop(log, sigs, errc, node.Removed())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := []error{served, srv.Shutdown(ctx), node.Close()}
	err = errors.Join(errs...)
	if err != nil {
		log.Error("stopped", "err", err)
	} else {
		log.Info("stopped")
	}
	return err
}

// serveFailure is what the HTTP server's return means: it returns only
// when it cannot go on, so nil is a failure too.
func serveFailure(err error) error {
	if err == nil {
		err = errors.New("returned without being shut down")
	}
	return fmt.Errorf("http server: %w", err)
}

// awaitStop waits for a signal or the node's removal from the cluster (nil:
// a clean stop) or for a failure the node cannot go on after (the HTTP
// server returned, a join was refused for good): never nil, so that serve
// exits non-zero and a supervisor (Restart=on-failure) starts the node
// again.
func awaitStop(log *slog.Logger, sigs <-chan os.Signal, errc <-chan error, removed <-chan struct{}) error {
	select {
	case sig := <-sigs:
		log.Info("shutting down", "signal", sig.String())
		return nil
	case <-removed:
		log.Info("shutting down: this node is no longer a member of the cluster (it was removed, or left)")
		return nil
	case err := <-errc:
		log.Error("stopping", "err", err)
		return err
	}
}

// broker is what serve runs: one Raft group (raft.Node) or several
// (cluster.Host).
type broker interface {
	server.Broker
	// Engine is the engine the analytics read store figures from: group
	// 1's, or the directory's on a node that holds no replica of group 1.
	Engine() *engine.Engine
	// Removed is closed once the node knows the cluster removed it (a
	// leave it was not told of): it stops serving then.
	Removed() <-chan struct{}
	Close() error
}

// openBroker opens the node's Raft groups: one as raft.Open does, or the
// directory and c.groups data groups of replicas voters as a cluster.Host,
// whose moves are counted in ms (meter.Moves).
func openBroker(opts raft.Options, c serveConfig, replicas int, fwd *nodes.Client, ms *metrics.Set) (broker, error) {
	if c.groups == 1 {
		return raft.Open(opts)
	}
	ho := nodes.HostOptions{Node: opts, Groups: c.groups, Replicas: replicas, ReplaceAfter: c.replaceAfter, Balance: c.balance,
		RetireHold: c.retireHold, OnMove: meter.NewMoves(ms).Record}
	if fwd != nil {
		ho.Forward = fwd
	}
	h, err := nodes.OpenHost(ho)
	if err != nil {
		return nil, err
	}
	return hostBroker{h}, nil
}

// hostBroker is a cluster.Host as serve runs it.
type hostBroker struct{ *nodes.Host }

func (h hostBroker) Engine() *engine.Engine {
	if n := h.Group(1); n != nil {
		return n.Engine()
	}
	return h.Group(0).Engine()
}

// newLogger is the node's logger: text or JSON lines on w at level.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	o := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// storageGuard guards the filesystems of the node's data directories (they
// exist once the node is open) and logs what it sees at start.
func storageGuard(log *slog.Logger, c serveConfig) (*diskspace.Guard, error) {
	var dirs []string
	for _, sub := range []string{"engine", "raft", "snapshots", "spool"} {
		dir := filepath.Join(c.data, sub)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
		dirs = append(dirs, dir)
	}
	g, err := diskspace.New(diskspace.Options{Dirs: dirs, MinFreeBytes: c.minFree})
	if err != nil {
		return nil, err
	}
	st := g.Status()
	if c.minFree == 0 {
		log.Warn("free-space guard off (--min-free-bytes 0): a full disk will stop this node")
	} else if !st.OK {
		log.Warn("writes that add data will answer 507 until space returns", "reason", st.Reason)
	}
	if len(st.Dirs) > 0 {
		log.Info("free-space guard", "reserve", diskspace.FormatBytes(c.minFree), "free", diskspace.FormatBytes(st.Dirs[0].Free), "dir", st.Dirs[0].Path)
	}
	return g, nil
}

// clusterHTTP is the client serve asks another node's HTTP API with
// before it serves (the join checks and the join): roots verify its HTTPS.
func clusterHTTP(timeout time.Duration, roots *tls.Config) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: roots}}
}

// joinAllowed asks the node at url whether it takes this node's cluster
// secret: a join route asked with an empty body answers 403 (or 401) for a
// wrong secret and 400 past the check, changing nothing. A node that does
// not answer is no reason to stop (the cluster may be starting):
// joinCluster retries.
func joinAllowed(url, secret string, roots *tls.Config) error {
	client := clusterHTTP(10*time.Second, roots)
	resp, err := postMembership(client, url, nodes.JoinPath, "{}", secret, "")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("--join %s refuses this node: %s: %s (every node needs the same cluster secret)",
			url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// clusterMembers reads the ids of the voters the node at url counts from
// its /health (public: "members", its latest configuration's, the
// directory's with groups; "nodes", read every few seconds, from a binary
// without it), and the cluster's id.
func clusterMembers(url string, roots *tls.Config) ([]string, string, error) {
	client := clusterHTTP(10*time.Second, roots)
	resp, err := client.Get(strings.TrimSuffix(url, "/") + "/health")
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var h struct {
		Cluster string   `json:"cluster"`
		Members []string `json:"members"`
		Nodes   []struct {
			ID string `json:"id"`
		} `json:"nodes"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&h); err != nil {
		return nil, "", fmt.Errorf("%s/health: %s: %w", url, resp.Status, err)
	}
	if h.Members != nil {
		return h.Members, h.Cluster, nil
	}
	var ids []string
	for _, n := range h.Nodes {
		ids = append(ids, n.ID)
	}
	return ids, h.Cluster, nil
}

// joinCluster asks a running node (which forwards to the leader) to add this
// node, first as a non-voter, then, once this node has applied as much as
// the node that added it had (applied says how much it has), as a voter:
// killed before it caught up, its store may be empty, and only a voter's
// empty store is refused at start (raft.ErrStoreLost). A node of an earlier
// release adds a voter at once and names no index; the promotion is then a
// join of a voter, which does nothing. Each step is retried until it
// succeeds (the cluster may be electing; a promotion may wait for the
// other voters to be live). A refusal of the secret is final: fail gets
// it, and serve stops with it.
func joinCluster(log *slog.Logger, url, id, raftAddr, secret string, roots *tls.Config, applied func() uint64, fail func(error)) {
	client := clusterHTTP(15*time.Second, roots)
	target, _, ok := joinAs(log, client, url, id, raftAddr, secret, "nonvoter", fail)
	if !ok {
		return
	}
	began, reported := time.Now(), time.Now()
	for applied() < target {
		if time.Since(reported) >= 10*time.Second {
			reported = time.Now()
			log.Info("joined as a non-voter; catching up before the promotion to voter",
				"applied", applied(), "target", target, "waited", time.Since(began).Round(time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, voter, ok := joinAs(log, client, url, id, raftAddr, secret, "voter", fail)
	switch {
	case ok && voter:
		log.Info("joined cluster as a voter", "via", url, "caughtUpIn", time.Since(began).Round(time.Millisecond))
	case ok:
		log.Info("joined cluster; the directory has its most voters, so this node follows it as a non-voter "+
			"(it holds replicas and serves as any node; the directory's leader promotes it when a voter leaves)",
			"via", url, "caughtUpIn", time.Since(began).Round(time.Millisecond))
	}
}

// joinAs asks url's node to add this node as a voter or a non-voter (the
// join route's "as"), retrying until it succeeds, and returns the index
// the answer names (0 when it names none) and whether it says this node is
// a voter (a node of an earlier release says nothing: it adds what it is
// asked). ok false: refused for good (fail has been called).
func joinAs(log *slog.Logger, client *http.Client, url, id, raftAddr, secret, as string, fail func(error)) (applied uint64, voter, ok bool) {
	body := fmt.Sprintf(`{"id":%q,"addr":%q,"as":%q}`, id, raftAddr, as)
	for attempt := 1; ; attempt++ {
		resp, err := postMembership(client, url, nodes.JoinPath, body, secret, "")
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				var answer struct {
					Applied uint64 `json:"applied"`
					Voter   *bool  `json:"voter"`
				}
				_ = json.Unmarshal(msg, &answer) // an answer without it waits for nothing
				log.Info("joined cluster", "via", url, "as", as)
				return answer.Applied, answer.Voter == nil && as == "voter" || answer.Voter != nil && *answer.Voter, true
			}
			err = fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
			if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized {
				log.Error("join cluster refused for good", "via", url, "err", err)
				fail(fmt.Errorf("--join %s refuses this node: %w", url, err))
				return 0, false, false
			}
		}
		log.Warn("join cluster", "via", url, "as", as, "attempt", attempt, "err", err)
		time.Sleep(min(time.Duration(attempt)*time.Second, 5*time.Second))
	}
}

// servePprof serves net/http/pprof's handlers on their own listener, apart
// from the API.
func servePprof(log *slog.Logger, addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	log.Info("pprof serving", "addr", addr)
	if err := http.ListenAndServe(addr, mux); err != nil {
		log.Error("pprof server stopped", "err", err)
	}
}
