package raft

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/logstore"
)

// Peer is one server of a Raft configuration: a voter unless NonVoter.
// Options.Peers and peers.json name a static membership with them, and
// Node.Configuration reads a group's.
type Peer struct {
	ID   string
	Addr string // Raft address host:port
	// NonVoter makes the server a non-voter: it receives the log but does
	// not vote or count towards the quorum (peers.json's "non_voter").
	NonVoter bool
}

// Options configures a Node. Start from DefaultOptions.
type Options struct {
	// ID is this node's id, unique in the cluster for all time.
	ID string
	// Dir holds the node's data: engine/ (state), raft/ (log and stable
	// store) and snapshots/.
	Dir string
	// RaftAddr is the TCP address the Raft transport binds and advertises.
	// Ignored when Transport is set.
	RaftAddr string
	// Transport, when set, replaces the TCP transport (tests use raft's
	// in-memory transport). A node on such a transport cannot dial a
	// joining node to check it, so Join refuses unless forced.
	Transport hraft.Transport
	// TLS, when set, runs the TCP transport over mutual TLS: every node
	// presents its certificate and verifies its peer's against RootCAs, the
	// cluster CA (ClientCAs defaults to it; a client certificate is always
	// required). A dialing node also checks that the certificate names the
	// host of the Raft address it dialed, so each node's certificate must
	// carry its Raft host as an IP or DNS SAN and allow both server and
	// client authentication. LoadTLS builds one from PEM files. Not with
	// Transport.
	TLS *tls.Config
	// ClusterSecret, when set, opens every Raft connection with a mutual
	// challenge-response keyed by it (HMAC-SHA256; the bytes are in
	// transport.go), with or without TLS: a peer that does not know it is
	// disconnected before Raft reads a byte from it. Every node needs the
	// same secret. Without TLS it authenticates connections but does not
	// hide or protect the stream, and a weak secret can be guessed offline
	// from one recorded handshake: use 32 random bytes or more. Not with
	// Transport.
	ClusterSecret string
	// HTTPAddr is the address peers use to reach this node's HTTP API; the
	// leader publishes it so followers can forward to it.
	HTTPAddr string
	// Peers is the static membership this node bootstraps with on its first
	// start (itself included). Empty with Bootstrap set: a single voter.
	Peers []Peer
	// Bootstrap makes a node without peers and without state bootstrap a
	// single-voter cluster (the embedded default). A node meant to join an
	// existing cluster leaves it false.
	Bootstrap bool
	// AwaitFounders makes a founder (Peers lists others besides it) whose
	// store holds no Raft state ask every other founder what it holds
	// before bootstrapping, and refuse to start when the cluster already
	// runs without this store (ErrStoreLost, ErrNotMember): a lost disk
	// never votes (identity.go). Open blocks until every founder has
	// answered, so founders start together. DefaultOptions sets it; tests
	// that open founders one after another on the TCP transport clear it.
	AwaitFounders bool
	// JoinMembers, for a node that joins (no Peers, no Bootstrap) and
	// holds no Raft state, returns the ids of the servers the cluster it
	// joins counts (serve reads them from --join's /health). Open refuses
	// with ErrStoreLost when they include ID, as for a founder (a joiner's
	// lost disk), and asks again while it fails. Nil: no check.
	// It also returns the cluster's id (/health "cluster"), which the node
	// records as its own.
	JoinMembers func() (members []string, cluster string, err error)
	// Engine configures the state machine's store. Sync is forced off: the
	// Raft log is the write-ahead log; Logger is Logger.
	Engine engine.Options
	// LogStore configures the Raft log's store (raft/logstore). NoSync is
	// forced to !RaftLogSync and Logger goes to Logger. Its FS and the
	// engine's are where tests inject I/O errors; OnFatal of both defaults
	// to ending the process with a clear message (fault.Exit).
	LogStore logstore.Options
	// Logger receives the node's logs; raft's and Pebble's are bridged into
	// it at warning level and above (raft's from info level when Logger is
	// enabled for debug).
	Logger *slog.Logger
	// ApplyTimeout bounds how long a command may wait to be committed.
	ApplyTimeout time.Duration
	// MaxInFlight is how many log entries may be in flight at once; commands
	// arriving meanwhile are grouped into the next entry (group commit).
	MaxInFlight int
	// MaxBatchCommands caps the commands grouped into one log entry.
	MaxBatchCommands int
	// LogCacheBytes bounds the newest log entries kept in memory for
	// replication and apply (logcache.go); older ones are read from the log
	// store.
	LogCacheBytes int
	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout tune raft's
	// failure detection (raft's defaults are 1 s, 1 s, 500 ms).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is how long a leader with no new entry to send waits
	// (up to twice as long, at random) before it sends its followers the
	// commit index anyway (raft's default, 50 ms): its heartbeats carry
	// none, so a follower learns that an entry committed with the next
	// entries after it, or this long after. What a follower must learn
	// sooner is published (Node.Publish). Tests raise it to show that
	// nothing waits for it.
	CommitTimeout time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one; TrailingLogs how many entries a snapshot leaves
	// behind for slow followers; SnapshotInterval how often to check.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	// RetentionInterval is how often the leader proposes a retention sweep
	// (retention, eviction, index purge); 0 disables it.
	RetentionInterval time.Duration
	// OnSweep, when set, is called on the leader with the result of every
	// retention sweep it proposed and that applied (the analytics record
	// what retention deleted). It runs on the sweep loop: it must not block.
	OnSweep func(engine.SweepResult)
	// OnEntry, when set, is called on the leader for every log entry it
	// proposed that committed and applied, with how long its oldest command
	// queued for it (group commit: waiting for an entry to be free) and how
	// long Raft took from the proposal to the apply (the log append, the
	// quorum, the FSM). It runs on the entry's await goroutine: it must not
	// block.
	OnEntry func(EntryTimes)
	// Version is this node's binary version, which it advertises with its
	// command version (version.go).
	Version string
	// CommandVersion is the command version this node advertises; 0 is
	// command.MaxVersion, what it applies. Only tests set another.
	CommandVersion uint8
	// Versions reads the other nodes' versions (package cluster); nil:
	// every other node counts as version 1.
	Versions VersionReader
	// VersionInterval is how often the versions are read (default 5 s).
	VersionInterval time.Duration
	// Forward, when set, is how a follower relays its own HTTP address to
	// the leader (version.go); a cluster.Host's groups get its HostOptions.Forward.
	Forward Forwarder
	// RaftLogSync is UNSAFE when false: Raft log appends are not fsynced and
	// a crash can lose acknowledged commands. Only benchmarks turn it off.
	RaftLogSync bool
}

// DefaultOptions returns the options of a production node.
func DefaultOptions() Options {
	return Options{
		Engine:             engine.DefaultOptions(),
		LogStore:           logstore.DefaultOptions(),
		Logger:             slog.Default(),
		ApplyTimeout:       10 * time.Second,
		MaxInFlight:        2,
		MaxBatchCommands:   1024,
		LogCacheBytes:      16 << 20,
		HeartbeatTimeout:   1000 * time.Millisecond,
		ElectionTimeout:    1000 * time.Millisecond,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		// A snapshot is a fsync and a 13-byte file (snapstore.go), so it is
		// taken often: a restart reads at most the log since the last one.
		SnapshotThreshold: 256,
		TrailingLogs:      10240,
		SnapshotInterval:  2 * time.Second,
		RetentionInterval: 5 * time.Second,
		VersionInterval:   5 * time.Second,
		RaftLogSync:       true,
		AwaitFounders:     true,
	}
}

// Validate reports an option that cannot work.
func (o Options) Validate() error {
	switch {
	case o.ID == "":
		return fmt.Errorf("raft: options: ID is required")
	case o.Dir == "":
		return fmt.Errorf("raft: options: Dir is required")
	case o.Transport == nil && o.RaftAddr == "":
		return fmt.Errorf("raft: options: RaftAddr or Transport is required")
	case o.Transport != nil && (o.TLS != nil || o.ClusterSecret != ""):
		return fmt.Errorf("raft: options: TLS and ClusterSecret protect the TCP transport; they cannot be used with Transport")
	case o.TLS != nil && (o.TLS.RootCAs == nil || (len(o.TLS.Certificates) == 0 && (o.TLS.GetCertificate == nil || o.TLS.GetClientCertificate == nil))):
		return fmt.Errorf("raft: options: TLS needs this node's certificate and RootCAs (the cluster CA); see LoadTLS")
	case o.Logger == nil:
		return fmt.Errorf("raft: options: Logger is required")
	case o.ApplyTimeout <= 0 || o.MaxInFlight < 1 || o.MaxBatchCommands < 1 || o.LogCacheBytes < 1 || o.VersionInterval <= 0:
		return fmt.Errorf("raft: options: ApplyTimeout, MaxInFlight, MaxBatchCommands, LogCacheBytes and VersionInterval must be positive")
	case o.CommitTimeout != 0 && o.CommitTimeout < time.Millisecond:
		return fmt.Errorf("raft: options: CommitTimeout must be 1ms or more (0: raft's default)")
	}
	for _, p := range o.Peers {
		if p.ID == "" || p.Addr == "" {
			return fmt.Errorf("raft: options: peer %+v needs an id and an address", p)
		}
	}
	if err := o.LogStore.Validate(); err != nil {
		return fmt.Errorf("raft: options: %w", err)
	}
	return o.Engine.Validate()
}

// EntryTimes is where one log entry's time went (Options.OnEntry).
type EntryTimes struct {
	Group     uint32        // the Raft group (1 unless a Host runs several)
	Commands  int           // commands grouped into the entry
	Queued    time.Duration // the oldest command's wait for the proposer
	Committed time.Duration // from the proposal to the applied entry
}
