package raft

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/raft/command"
)

// The cluster version (package command, version.go).
//
// Each node advertises the highest command version it applies
// (Options.CommandVersion, command.MaxVersion by default) and its binary
// version on GET /health, which every binary has served. A node learns the
// others' by reading their /health (a VersionReader, package cluster) at
// the HTTP address each node records in the replicated state (command.
// Announce, key http/<id>): a leader records its own when elected, as it
// always has, and a follower relays its own to the leader (the relay path
// of package cluster). Every VersionInterval each node reads every server
// of its configuration, voters and non-voters (a non-voter applies every
// entry too), and the cluster version is the lowest it read. A server it
// cannot read (no address recorded yet, no cluster secret to relay one,
// unreachable, or an older binary whose /health has no commandVersion)
// counts as version 1: what is not known to be newer is taken as the
// oldest. Until its first read a node takes the cluster as version 1.
//
// A server that stops answering keeps the version it last answered, here
// and across this node's restarts: the versions last answered are kept in
// the group's directory (file "versions", below). Without that a node
// restarted while another is down for good counted the dead one as
// version 1 and refused every newer command, among them the ones that
// re-create the dead node's replicas and remove it: the repair stalled
// whenever the restarted node led the directory. A node this one never
// heard answer (it joined after the other died) takes the version the
// servers that answer last heard from it (each /health lists what its
// node holds of the others): the lowest of them; only when none heard it
// does it count as 1.
//
// A node never proposes a command above the cluster version
// (ErrClusterVersion): every proposal passes proposeOnce, whether this
// node built the command or another node relayed it.
//
// Why /health and the replicated address, and not the Raft transport or a
// new record in the log: the transport's hello refuses any byte it does
// not expect (transport.go), so an older node would drop a newer one's
// connections; a version record written through the log would need a
// command the older nodes cannot apply, to learn whether they can apply
// it. /health is there on every version, answers without credentials, and
// a missing field reads as version 1. Polling costs one small GET per
// server per interval; it also sees a node restarted on an older binary
// within an interval, which a record written once would not.

// NodeVersion is what one server of the configuration advertises.
type NodeVersion struct {
	ID string
	// Binary is the server's binary version ("" when unknown).
	Binary string
	// Command is the highest command version it applies: 1 when unknown.
	Command uint8
	// Known says the server answered; an unknown one counts as version 1.
	Known bool
	// Others is what the server itself holds of the other servers'
	// versions (read with its own; package cluster reads its /health's
	// nodes): a server this node never heard answer takes the version
	// the others last heard from it.
	Others []NodeVersion
}

// A VersionReader reads what the node at an HTTP address advertises
// (package cluster reads its /health). A Command of 0, a field the node
// did not send, is version 1.
type VersionReader interface {
	NodeVersion(ctx context.Context, httpAddr string) (NodeVersion, error)
}

// ErrClusterVersion is returned for a command this node will not propose
// because the cluster runs at an older command version: some server has
// not been upgraded to a binary that applies it. Nothing was proposed.
var ErrClusterVersion = errors.New("raft: command needs a newer cluster version")

// versions is a node's view of the cluster's versions.
type versions struct {
	cluster atomic.Uint32 // the cluster version; 1 until the first read
	mu      sync.Mutex
	nodes   []NodeVersion // by the configuration's order
	kept    string        // the versions file's content, as last read or written
}

// commandVersion is the version a stamped command needs (a variable so
// that a test can give a command of today a version above MaxVersion).
var commandVersion = command.Version

// advertised is the command version this node advertises.
func (n *Node) advertised() uint8 {
	if n.opts.CommandVersion != 0 {
		return n.opts.CommandVersion
	}
	return command.MaxVersion
}

// ClusterVersion is the command version the cluster runs at, as this node
// last read it.
func (n *Node) ClusterVersion() uint8 { return uint8(n.versions.cluster.Load()) }

// checkVersion refuses a command above the cluster version, naming the
// servers that hold it back: one on an older binary, or one no server has
// heard answer yet (a node that has just started or joined counts as 1
// until it has been read, within VersionInterval).
func (n *Node) checkVersion(s command.Stamped) error {
	v, at := commandVersion(s), n.ClusterVersion()
	if v <= at {
		return nil
	}
	var behind []string
	n.versions.mu.Lock()
	for _, o := range n.versions.nodes {
		switch {
		case o.Command >= v:
		case !o.Known && o.Command <= 1:
			behind = append(behind, o.ID+" has not answered yet (a node that has just started or joined is read within seconds: retry then)")
		default:
			behind = append(behind, fmt.Sprintf("%s applies version %d (upgrade it first)", o.ID, o.Command))
		}
	}
	n.versions.mu.Unlock()
	why := "upgrade the others first"
	if len(behind) > 0 {
		why = strings.Join(behind, "; ")
	}
	return fmt.Errorf("%w: the command needs version %d and the cluster runs at %d until every node applies it: "+
		"%s (queen status shows each node's version)", ErrClusterVersion, v, at, why)
}

// versionLoop reads the servers' versions every VersionInterval, and
// relays this node's HTTP address to the leader while the replicated
// state does not hold it.
func (n *Node) versionLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.opts.VersionInterval)
	defer t.Stop()
	for {
		n.announceSelf()
		n.readVersions()
		select {
		case <-t.C:
		case <-n.done:
			return
		}
	}
}

// readVersions reads every server's version and sets the cluster's.
func (n *Node) readVersions() {
	f := n.raft.GetConfiguration()
	if f.Error() != nil || len(f.Configuration().Servers) == 0 {
		return
	}
	servers := f.Configuration().Servers
	out := make([]NodeVersion, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = n.readVersion(s)
		}()
	}
	wg.Wait()
	// A server that cannot be read is taken at the version it last
	// answered, so that a node that is down does not lower the cluster's
	// version: that refused every command of a newer version, among them
	// the ones that re-create a dead node's replicas and remove it (a
	// node that comes back on an older binary answers, and lowers it
	// then; one never read counts as version 1).
	n.versions.mu.Lock()
	last := map[string]uint8{}
	for _, v := range n.versions.nodes {
		if v.Known || v.Command > 1 {
			last[v.ID] = v.Command
		}
	}
	lowest := n.advertised() // this node is among them
	for i, v := range out {
		switch {
		case v.Known:
		case last[v.ID] > v.Command:
			out[i].Command = last[v.ID]
		default:
			out[i].Command = max(v.Command, heard(out, v.ID))
		}
		lowest = min(lowest, out[i].Command)
	}
	for i := range out {
		out[i].Others = nil // read, and not for Versions' callers
	}
	n.versions.nodes = out
	n.versions.mu.Unlock()
	n.keepVersions(out)
	if old := uint8(n.versions.cluster.Swap(uint32(lowest))); old != lowest {
		n.log.Info("cluster version", "from", old, "to", lowest)
	}
}

// heard is the version the servers that answered last heard from server
// id, the lowest of them (a server that went back to an older binary
// before it stopped answering may have told only some); 1 when none of
// them heard it. It is how a node that never heard a server answer (it
// joined after that server died) avoids counting it as version 1.
func heard(answered []NodeVersion, id string) uint8 {
	var low uint8
	for _, a := range answered {
		if !a.Known {
			continue
		}
		for _, o := range a.Others {
			if o.ID == id && o.Command > 1 && (low == 0 || o.Command < low) {
				low = o.Command
			}
		}
	}
	return max(low, 1)
}

// The file "versions" in the group's directory keeps the command version
// each server of the configuration last answered with, one line a server,
// "<id> <version>\n", sorted by id; versions of 1 are left out (1 is what
// an unknown server counts as anyway). It is a hint, not state: written
// whole (a temporary file renamed over it) when it would change, read once
// when the node opens, and a missing or unreadable file means nothing is
// known. Servers that left the configuration drop out at the next write.
const versionsFile = "versions"

// loadVersions seeds the view with the versions the file keeps, as not
// answered: readVersions takes them as each server's last answer until it
// answers again.
func (n *Node) loadVersions() {
	b, err := os.ReadFile(filepath.Join(groupDir(n.opts.Dir, n.group), versionsFile))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			n.log.Warn("cluster version: read the versions kept", "err", err)
		}
		return
	}
	var kept []NodeVersion
	for line := range strings.Lines(string(b)) {
		id, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		c, err := strconv.ParseUint(v, 10, 8)
		if !ok || id == "" || err != nil {
			n.log.Warn("cluster version: the versions kept are not readable; ignored", "line", line)
			return
		}
		kept = append(kept, NodeVersion{ID: id, Command: uint8(c)})
	}
	n.versions.mu.Lock()
	n.versions.nodes, n.versions.kept = kept, string(b)
	n.versions.mu.Unlock()
}

// keepVersions writes the versions servers last answered, when they
// differ from the file's.
func (n *Node) keepVersions(vs []NodeVersion) {
	var b strings.Builder
	for _, v := range slices.SortedFunc(slices.Values(vs), func(a, b NodeVersion) int { return strings.Compare(a.ID, b.ID) }) {
		if v.Command > 1 && v.ID != n.opts.ID {
			fmt.Fprintf(&b, "%s %d\n", v.ID, v.Command)
		}
	}
	n.versions.mu.Lock()
	same := b.String() == n.versions.kept
	n.versions.mu.Unlock()
	if same {
		return
	}
	path := filepath.Join(groupDir(n.opts.Dir, n.group), versionsFile)
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, []byte(b.String()), 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		n.log.Warn("cluster version: keep the versions read", "err", err)
		return
	}
	n.versions.mu.Lock()
	n.versions.kept = b.String()
	n.versions.mu.Unlock()
}

// readVersion reads one server's version; version 1 when it cannot.
func (n *Node) readVersion(s hraft.Server) NodeVersion {
	id := string(s.ID)
	if id == n.opts.ID {
		return NodeVersion{ID: id, Binary: n.opts.Version, Command: n.advertised(), Known: true}
	}
	unknown := NodeVersion{ID: id, Command: 1}
	addr := n.engine.ClusterValue(command.HTTPKey(id))
	if addr == "" || n.opts.Versions == nil {
		return unknown
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	v, err := n.opts.Versions.NodeVersion(ctx, addr)
	if err != nil || (v.ID != "" && v.ID != id) {
		// An address another node now answers at tells nothing of id.
		n.log.Debug("cluster version: read a node", "node", id, "addr", addr, "err", err, "answered", v.ID)
		return unknown
	}
	v.ID, v.Known = id, true
	if v.Command == 0 {
		v.Command = 1
	}
	return v
}

// versionTimeout bounds one read of a server's version.
const versionTimeout = 2 * time.Second

// announceSelf relays this node's HTTP address to the leader when the
// replicated state does not hold it (a leader records its own, in
// leaderLoop). An older leader refuses the relay; the next round asks
// again.
func (n *Node) announceSelf() {
	if n.opts.HTTPAddr == "" || n.opts.Forward == nil ||
		n.engine.ClusterValue(command.HTTPKey(n.opts.ID)) == n.opts.HTTPAddr {
		return
	}
	st := n.Status()
	if st.Role != "follower" || st.LeaderHTTP == "" {
		return
	}
	entry, err := RelayEntry(command.Announce{NodeID: n.opts.ID, HTTP: n.opts.HTTPAddr})
	if err != nil {
		n.log.Warn("raft: announce this node's address", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.ApplyTimeout)
	defer cancel()
	if _, _, err := n.opts.Forward.Forward(ctx, st.LeaderHTTP, n.group, entry); err != nil {
		n.log.Debug("raft: announce this node's address to the leader", "leader", st.Leader, "err", err)
	}
}

// Versions is every server's version as this node last read them, by id.
func (n *Node) Versions() []NodeVersion {
	n.versions.mu.Lock()
	defer n.versions.mu.Unlock()
	out := slices.Clone(n.versions.nodes)
	slices.SortFunc(out, func(a, b NodeVersion) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}
