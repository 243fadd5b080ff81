package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"

	qcluster "github.com/queenmq/queen/cluster" // the test harness has a type cluster
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/diskspace"
)

// The operator's commands: queen status, queen queues, queen dlq. They
// speak the HTTP API like any client (with --token when JWT is on) and
// print a table, or JSON with --json.

// apiClient is the HTTP side of the operator commands.
type apiClient struct {
	hc    *http.Client
	token string
	out   io.Writer
}

// clientFlags adds the flags every operator command has; clientEnv are
// the ones also read from the environment.
func clientFlags(fs *flag.FlagSet) (token, ca *string, asJSON *bool) {
	token = fs.String("token", "", "JWT sent as Authorization: Bearer")
	ca = fs.String("tls-ca", "", "PEM CA certificate to trust for https URLs, besides the system roots")
	asJSON = fs.Bool("json", false, "print JSON instead of a table")
	return
}

var clientEnv = []string{"url", "token", "tls-ca"}

func newAPIClient(token, ca string, out io.Writer) (*apiClient, error) {
	roots, err := trustedRoots(ca)
	if err != nil {
		return nil, err
	}
	return &apiClient{hc: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: roots}},
		token: token, out: out}, nil
}

// call sends one request and decodes a 2xx JSON answer into v (nil: drop
// it); another status is an error carrying the broker's message.
func (c *apiClient) call(method, u string, body io.Reader, v any) error {
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &statusError{Method: method, URL: u, Status: resp.StatusCode, Text: resp.Status}
		var body struct{ Error, Code string }
		if json.Unmarshal(b, &body) == nil && body.Error != "" {
			e.Msg, e.Code = body.Error, body.Code
		}
		return e
	}
	if v == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	return json.Unmarshal(b, v)
}

// statusError is a non-2xx answer: the broker's {"error","code"} when it
// sent one.
type statusError struct {
	Method, URL string
	Status      int
	Text        string // the status line's text
	Msg, Code   string
}

func (e *statusError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("%s %s: %s", e.Method, e.URL, e.Text)
	}
	return fmt.Sprintf("%s %s: %d %s (%s)", e.Method, e.URL, e.Status, e.Msg, e.Code)
}

// splitURLs reads --url: repeatable or comma-separated.
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, ",") }
func (u *urlList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimRight(strings.TrimSpace(s), "/"); s != "" {
			*u = append(*u, s)
		}
	}
	return nil
}

// nodeStatus is what queen status shows of a node.
// writeIdentities says the cluster's id and each node's store id
// (raft/identity.go), and when the nodes asked name different clusters.
func writeIdentities(w io.Writer, nodes []nodeStatus) {
	clusters := map[string][]string{}
	var stores []string
	for _, n := range nodes {
		if n.Error != "" || n.Store == "" {
			continue
		}
		clusters[n.Cluster] = append(clusters[n.Cluster], n.ID)
		stores = append(stores, n.ID+"="+n.Store)
	}
	switch len(clusters) {
	case 0:
		return
	case 1:
		for id := range clusters {
			fmt.Fprintf(w, "cluster id %s\n", cmp.Or(id, "(none: bootstrapped before cluster ids)"))
		}
	default:
		var parts []string
		for id, ns := range clusters {
			parts = append(parts, fmt.Sprintf("%s: %s", cmp.Or(id, "(none)"), strings.Join(ns, ",")))
		}
		slices.Sort(parts)
		fmt.Fprintf(w, "cluster ids DIFFER (these nodes are not one cluster): %s\n", strings.Join(parts, "; "))
	}
	fmt.Fprintf(w, "store ids: %s\n", strings.Join(stores, " "))
}

type nodeStatus struct {
	URL     string `json:"url"`
	ID      string `json:"id,omitempty"`
	Role    string `json:"role,omitempty"`
	Leader  string `json:"leader,omitempty"`
	Term    uint64 `json:"term"`
	Applied uint64 `json:"applied"`
	Lag     uint64 `json:"lag"` // entries behind the most advanced node reached
	Free    uint64 `json:"freeBytes"`
	Version string `json:"version,omitempty"`
	// Store is the node's store id and Cluster its cluster's id
	// (raft/identity.go); empty from a binary without them.
	Store   string `json:"store,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	// CommandVersion is the highest command version the node applies,
	// ClusterVersion the one it reads the cluster at (raft/version.go);
	// 1 for a node too old to say.
	CommandVersion uint8  `json:"commandVersion,omitempty"`
	ClusterVersion uint8  `json:"clusterVersion,omitempty"`
	Storage        string `json:"storage,omitempty"` // "" when ok, else why not
	Fault          string `json:"fault,omitempty"`
	Error          string `json:"error,omitempty"` // the node did not answer
	Healthy        bool   `json:"healthy"`
	Reserved       uint64 `json:"reserveBytes"`
	// Groups are the node's Raft groups when it spreads queues over
	// several (--groups): the directory (0) and the data groups.
	Groups []groupStatus `json:"groups,omitempty"`
}

// notHosted is /health's role of a group a node is not a voter of (its
// data groups on R of N nodes): the node knows the group's leader from
// the directory, and its replica is idle.
const notHosted = "none"

// groupStatus is one Raft group on one node, as queen status shows it.
type groupStatus struct {
	Group   uint32 `json:"group"`
	Role    string `json:"role"`
	Leader  string `json:"leader"`
	Term    uint64 `json:"term"`
	Applied uint64 `json:"applied"`
	Lag     uint64 `json:"lag"` // entries behind the group's most advanced replica reached
}

// statusCmd is queen status: every node's role, leader, term, applied
// index, lag, free disk and version, then the placement (the table only:
// --json keeps its list of nodes, and the placement's JSON is
// GET /api/v1/system/placement's).
func statusCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var urls urlList
	fs.Var(&urls, "url", "HTTP URL of a node, repeatable or comma-separated (default http://127.0.0.1:6632)")
	token, ca, asJSON := clientFlags(fs)
	if err := parseEnvFlags(fs, args, os.Getenv, clientEnv...); err != nil {
		return err
	}
	if len(urls) == 0 {
		urls = urlList{"http://127.0.0.1:6632"}
	}
	c, err := newAPIClient(*token, *ca, out)
	if err != nil {
		return err
	}
	nodes := make([]nodeStatus, len(urls))
	var top uint64
	for i, u := range urls {
		n := &nodes[i]
		n.URL = u
		var h struct {
			Status, Version, ID, Role, Leader, Fault string
			Store, Cluster                           string
			Applied, Term                            uint64
			CommandVersion, ClusterVersion           uint8
			Storage                                  struct {
				OK          bool   `json:"ok"`
				Reason      string `json:"reason"`
				Reserve     uint64 `json:"reserveBytes"`
				Directories []struct {
					Free uint64 `json:"freeBytes"`
				} `json:"directories"`
			}
			Groups []groupStatus
		}
		// /health answers 503 with the same body when unhealthy: read it.
		req, _ := http.NewRequest("GET", u+"/health", nil)
		resp, err := c.hc.Do(req)
		if err != nil {
			n.Error = err.Error()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(b, &h); err != nil {
			n.Error = fmt.Sprintf("%s: %v", resp.Status, err)
			continue
		}
		n.ID, n.Role, n.Leader, n.Term, n.Applied, n.Version, n.Fault = h.ID, h.Role, h.Leader, h.Term, h.Applied, h.Version, h.Fault
		n.Groups = h.Groups
		n.Store, n.Cluster = h.Store, h.Cluster
		n.CommandVersion, n.ClusterVersion = max(h.CommandVersion, 1), max(h.ClusterVersion, 1)
		n.Healthy = h.Status == "healthy"
		n.Reserved = h.Storage.Reserve
		if !h.Storage.OK {
			n.Storage = h.Storage.Reason
		}
		for j, d := range h.Storage.Directories {
			if j == 0 || d.Free < n.Free {
				n.Free = d.Free
			}
		}
		top = max(top, n.Applied)
	}
	groupTop := map[uint32]uint64{}
	for _, n := range nodes {
		for _, g := range n.Groups {
			groupTop[g.Group] = max(groupTop[g.Group], g.Applied)
		}
	}
	for i := range nodes {
		if nodes[i].Error == "" {
			nodes[i].Lag = top - nodes[i].Applied
		}
		for j := range nodes[i].Groups {
			if g := &nodes[i].Groups[j]; g.Role != notHosted {
				g.Lag = groupTop[g.Group] - g.Applied
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(nodes)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tURL\tROLE\tLEADER\tTERM\tAPPLIED\tLAG\tDISK FREE\tVERSION\tCMD VERSION\tSTATE")
	for _, n := range nodes {
		if n.Error != "" {
			fmt.Fprintf(w, "?\t%s\t-\t-\t-\t-\t-\t-\t-\t-\tunreachable: %s\n", n.URL, n.Error)
			continue
		}
		state := "ok"
		switch {
		case n.Fault != "":
			state = "storage fault: " + n.Fault
		case n.Storage != "":
			state = n.Storage
		case !n.Healthy:
			state = "unhealthy (no leader)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%s\n", n.ID, n.URL, n.Role, n.Leader, n.Term, n.Applied, n.Lag,
			diskspace.FormatBytes(n.Free), n.Version, n.CommandVersion, state)
	}
	if v, from := clusterVersion(nodes); v != 0 {
		fmt.Fprintf(w, "\ncluster version %d (%s)\n", v, from)
	}
	writeIdentities(w, nodes)
	if len(groupTop) > 0 {
		// With --groups the rows above are the directory's; each group
		// has its own leader.
		fmt.Fprintln(w, "\nGROUP\tNODE\tROLE\tLEADER\tTERM\tAPPLIED\tLAG")
		for g := range uint32(len(groupTop)) {
			for _, n := range nodes {
				for _, gs := range n.Groups {
					switch {
					case gs.Group != g:
					case gs.Role == notHosted: // on R of N: it relays to the leader
						fmt.Fprintf(w, "%d\t%s\t%s\t%s\t-\t-\t-\n", g, n.ID, gs.Role, gs.Leader)
					default:
						fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%d\n", g, n.ID, gs.Role, gs.Leader, gs.Term, gs.Applied, gs.Lag)
					}
				}
			}
		}
	}
	placementTable(w, c, nodes)
	return w.Flush()
}

// placement is GET /api/v1/system/placement's answer, as queen status
// shows it.
type placement struct {
	Nodes []struct {
		ID   string `json:"id"`
		Live bool   `json:"live"`
	} `json:"nodes"`
	Replicas int `json:"replicas"` // R on R of N, 0 when every group is on every node
	Groups   []struct {
		ID      uint32   `json:"id"`
		Members []string `json:"members"`
		Leader  string   `json:"leader"`
	} `json:"groups"`
	Queues []struct {
		Group uint32 `json:"group"`
	} `json:"queues"`
}

// placementTable writes the Raft groups, each with its leader, members and
// count of queues, as the leader reached (else the first node reached)
// knows them, and the nodes it does not hear from. A node that cannot say
// (an older binary, a token without read access) gets a line saying why.
func placementTable(w io.Writer, c *apiClient, nodes []nodeStatus) {
	from := slices.IndexFunc(nodes, func(n nodeStatus) bool { return n.Error == "" && n.Role == "leader" })
	if from < 0 {
		from = slices.IndexFunc(nodes, func(n nodeStatus) bool { return n.Error == "" })
	}
	if from < 0 {
		return
	}
	n := nodes[from]
	var p placement
	if err := c.call("GET", n.URL+"/api/v1/system/placement", nil, &p); err != nil {
		fmt.Fprintf(w, "\nplacement: %v\n", err)
		return
	}
	queues := map[uint32]int{}
	for _, q := range p.Queues {
		queues[q.Group]++
	}
	on := ""
	if p.Replicas > 0 {
		on = fmt.Sprintf("; each data group on %d of the %d nodes", p.Replicas, len(p.Nodes))
	}
	fmt.Fprintf(w, "\nplacement (as %s knows it%s)\n", n.ID, on)
	fmt.Fprintln(w, "GROUP\tLEADER\tMEMBERS\tQUEUES")
	for _, g := range p.Groups {
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\n", g.ID, cmp.Or(g.Leader, "-"), strings.Join(g.Members, ","), queues[g.ID])
	}
	if line := underReplicated(p); line != "" {
		fmt.Fprintln(w, line)
	}
	spreadTable(w, p)
	var down []string
	for _, d := range p.Nodes {
		if !d.Live {
			down = append(down, d.ID)
		}
	}
	if len(down) > 0 {
		fmt.Fprintf(w, "not live (%s does not hear from them): %s\n", n.ID, strings.Join(down, ", "))
	}
}

// underReplicated is the line naming the groups of p with fewer voters
// than they want (cluster.UnderReplicated, the rule of the gauge
// queen_groups_under_replicated: R for a data group, min(5, nodes) for
// the directory), each with its voters; "" when there are none. A data
// group on R-1 voters (a node removed by a forced leave, before a replica
// step places another) loses its quorum with one more lost node.
func underReplicated(p placement) string {
	l := raft.Layout{Nodes: make([]raft.LayoutNode, len(p.Nodes))}
	for i, n := range p.Nodes {
		l.Nodes[i] = raft.LayoutNode{ID: n.ID, Live: n.Live}
	}
	for _, g := range p.Groups {
		l.Groups = append(l.Groups, raft.LayoutGroup{ID: g.ID, Members: g.Members, Leader: g.Leader})
	}
	replicas := uint32(max(p.Replicas, 0))
	var each []string
	for _, g := range qcluster.UnderReplicated(l, replicas) {
		name := "group " + strconv.FormatUint(uint64(g.ID), 10)
		if g.ID == raft.Directory && len(p.Groups) > 1 {
			name += " (directory)"
		}
		each = append(each, fmt.Sprintf("%s has %d of %d voters (%s)", name, len(g.Members),
			qcluster.WantedVoters(g.ID, replicas, len(l.Nodes)), strings.Join(g.Members, ", ")))
	}
	if len(each) == 0 {
		return ""
	}
	return "under-replicated: " + strings.Join(each, "; ")
}

// spreadTable writes, with several data groups, how many each node is a
// voter of and leads (the directory, on every node, left out): on R of N
// nodes, the spread that the placement rule keeps within ceil(G·R/N).
func spreadTable(w io.Writer, p placement) {
	if len(p.Groups) < 2 || p.Groups[0].ID != 0 {
		return // one group: every node is its voter
	}
	voter, leads := map[string]int{}, map[string]int{}
	var ids []string
	for _, d := range p.Nodes {
		ids = append(ids, d.ID)
	}
	for _, g := range p.Groups[1:] {
		for _, m := range g.Members {
			voter[m]++
			if !slices.Contains(ids, m) {
				ids = append(ids, m) // a voter the configuration no longer lists
			}
		}
		leads[g.Leader]++
	}
	// At most five nodes vote in the directory; the others follow it
	// (cluster/voters.go).
	fmt.Fprintln(w, "\nNODE\tVOTER OF\tLEADS\tDIRECTORY")
	for _, id := range ids {
		dir := "follows"
		if slices.Contains(p.Groups[0].Members, id) {
			dir = "votes"
		}
		fmt.Fprintf(w, "%s\t%d of %d\t%d\t%s\n", id, voter[id], len(p.Groups)-1, leads[id], dir)
	}
}

// clusterVersion is the command version the cluster runs at as the
// leader reads it, or, with no leader reached, the lowest any node reads;
// 0 when no node answered.
func clusterVersion(nodes []nodeStatus) (uint8, string) {
	var lowest uint8
	for _, n := range nodes {
		switch {
		case n.Error != "":
		case n.Role == "leader":
			return n.ClusterVersion, "as the leader, " + n.ID + ", reads it"
		case lowest == 0 || n.ClusterVersion < lowest:
			lowest = n.ClusterVersion
		}
	}
	return lowest, "no leader reached: the lowest a node reads"
}

// queueRow is one queue of GET /api/v1/resources/queues as queen queues
// shows it.
type queueRow struct {
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Partitions int    `json:"partitions"`
	RaftGroup  uint32 `json:"raftGroup"` // with --groups
	Messages   struct {
		Total      int64 `json:"total"`
		Pending    int64 `json:"pending"`
		Processing int64 `json:"processing"`
	} `json:"messages"`
}

// queuesCmd is queen queues: every queue with its partitions and counts.
func queuesCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("queues", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:6632", "HTTP URL of any node")
	token, ca, asJSON := clientFlags(fs)
	if err := parseEnvFlags(fs, args, os.Getenv, clientEnv...); err != nil {
		return err
	}
	c, err := newAPIClient(*token, *ca, out)
	if err != nil {
		return err
	}
	var res struct {
		Queues []queueRow `json:"queues"`
	}
	var raw json.RawMessage
	if err := c.call("GET", strings.TrimRight(*base, "/")+"/api/v1/resources/queues", nil, &raw); err != nil {
		return err
	}
	if *asJSON {
		_, err := fmt.Fprintf(out, "%s\n", raw)
		return err
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return err
	}
	grouped := slices.ContainsFunc(res.Queues, func(q queueRow) bool { return q.RaftGroup != 0 })
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "QUEUE\tNAMESPACE\tPARTITIONS\tTOTAL\tPENDING\tPROCESSING"
	if grouped {
		header += "\tGROUP"
	}
	fmt.Fprintln(w, header)
	for _, q := range res.Queues {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d", q.Name, q.Namespace, q.Partitions, q.Messages.Total, q.Messages.Pending,
			q.Messages.Processing)
		if grouped {
			fmt.Fprintf(w, "\t%d", q.RaftGroup)
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

// dlqCmd is queen dlq list | replay | delete.
func dlqCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: queen dlq list|replay|delete [flags] (queen dlq list -h)")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("dlq "+sub, flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:6632", "HTTP URL of any node")
	token, ca, asJSON := clientFlags(fs)
	filter := map[string]*string{}
	if sub == "list" || sub == "replay" {
		for _, f := range []struct{ name, usage string }{
			{"queue", "only this queue"}, {"consumerGroup", "only this consumer group"}, {"partition", "only this partition (by name)"},
			{"from", "failed at or after this ISO-8601 time"}, {"to", "failed at or before this ISO-8601 time"},
		} {
			filter[f.name] = fs.String(f.name, "", f.usage)
		}
	}
	limit := fs.Int("limit", 100, "list: rows per page; replay: at most this many rows (0: all)")
	offset := fs.Int("offset", 0, "list: rows to skip")
	partID := fs.String("partition-id", "", "delete: the message's partition id")
	txn := fs.String("transaction-id", "", "delete: the message's transaction id")
	group := fs.String("group", "", "delete: only this group's row")
	if err := parseEnvFlags(fs, args, os.Getenv, clientEnv...); err != nil {
		return err
	}
	c, err := newAPIClient(*token, *ca, out)
	if err != nil {
		return err
	}
	root := strings.TrimRight(*base, "/")
	q := url.Values{}
	for k, v := range filter {
		if *v != "" {
			q.Set(k, *v)
		}
	}
	switch sub {
	case "list":
		q.Set("limit", fmt.Sprint(*limit))
		q.Set("offset", fmt.Sprint(*offset))
		var raw json.RawMessage
		if err := c.call("GET", root+"/api/v1/dlq?"+q.Encode(), nil, &raw); err != nil {
			return err
		}
		if *asJSON {
			_, err := fmt.Fprintf(out, "%s\n", raw)
			return err
		}
		var page struct {
			Messages []struct {
				TransactionID string `json:"transactionId"`
				PartitionID   string `json:"partitionId"`
				Queue         string `json:"queue"`
				Partition     string `json:"partition"`
				Group         string `json:"consumerGroup"`
				Error         string `json:"errorMessage"`
				FailedAt      string `json:"failedAt"`
			} `json:"messages"`
			Total int `json:"total"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return err
		}
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "FAILED AT\tQUEUE\tPARTITION\tGROUP\tTRANSACTION\tPARTITION ID\tERROR")
		for _, m := range page.Messages {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.FailedAt, m.Queue, m.Partition, m.Group, m.TransactionID, m.PartitionID, m.Error)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%d of %d dead letters\n", len(page.Messages), page.Total)
		return err
	case "replay":
		return dlqReplay(c, root, q, *limit, *asJSON)
	case "delete":
		if *partID == "" || *txn == "" {
			return fmt.Errorf("--partition-id and --transaction-id are required")
		}
		u := root + "/api/v1/messages/" + url.PathEscape(*partID) + "/" + url.PathEscape(*txn)
		if *group != "" {
			u += "?consumerGroup=" + url.QueryEscape(*group)
		}
		var res json.RawMessage
		if err := c.call("DELETE", u, nil, &res); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "%s\n", res)
		return err
	}
	return fmt.Errorf("unknown dlq command %q: want list, replay or delete", sub)
}

// dlqReplay redrives the rows the filters select (docs/decisions.md B4) in
// rounds of at most 100, with a progress bar (or one JSON line): each round
// is one call, each row replayed at most once however the rounds go.
func dlqReplay(c *apiClient, root string, q url.Values, limit int, asJSON bool) error {
	count := url.Values{}
	for k, v := range q {
		count[k] = v
	}
	count.Set("limit", "1")
	var first struct {
		Total int `json:"total"`
	}
	if err := c.call("GET", root+"/api/v1/dlq?"+count.Encode(), nil, &first); err != nil {
		return err
	}
	want := first.Total
	if limit > 0 {
		want = min(want, limit)
	}
	var bar *progressbar.ProgressBar
	if !asJSON {
		bar = progressbar.NewOptions(want, progressbar.OptionSetWriter(c.out), progressbar.OptionSetDescription("replaying"),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	}
	var replayed, failed int
	for replayed+failed < want {
		round := min(100, want-replayed-failed)
		q.Set("limit", fmt.Sprint(round))
		var res struct {
			Replayed int `json:"replayed"`
			Failed   int `json:"failed"`
		}
		if err := c.call("POST", root+"/api/v1/dlq/replay?"+q.Encode(), strings.NewReader("{}"), &res); err != nil {
			return err
		}
		replayed += res.Replayed
		failed += res.Failed
		if bar != nil {
			bar.Add(res.Replayed + res.Failed)
		}
		if res.Replayed+res.Failed == 0 {
			break // nothing left that the filters select
		}
	}
	if bar != nil {
		bar.Finish()
	}
	if asJSON {
		return json.NewEncoder(c.out).Encode(map[string]int{"replayed": replayed, "failed": failed})
	}
	_, err := fmt.Fprintf(c.out, "replayed %d, failed %d\n", replayed, failed)
	return err
}

// stepDownCmd is queen step-down: the node at --url hands over the
// leadership of every Raft group it leads (before maintenance on it). It
// acts on that node only; a node that leads nothing says so.
func stepDownCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("step-down", flag.ContinueOnError)
	u := fs.String("url", "http://127.0.0.1:6632", "HTTP URL of the node to step down")
	token, ca, asJSON := clientFlags(fs)
	if err := parseEnvFlags(fs, args, os.Getenv, clientEnv...); err != nil {
		return err
	}
	c, err := newAPIClient(*token, *ca, out)
	if err != nil {
		return err
	}
	var res struct {
		Transferred []uint32 `json:"transferred"`
	}
	if err := c.call("POST", strings.TrimRight(*u, "/")+"/api/v1/system/leadership/transfer", nil, &res); err != nil {
		return err
	}
	switch {
	case *asJSON:
		return json.NewEncoder(out).Encode(res)
	case len(res.Transferred) == 0:
		fmt.Fprintln(out, "this node leads no group another voter could take: nothing transferred")
	default:
		fmt.Fprintf(out, "transferred the leadership of group(s) %v\n", res.Transferred)
	}
	return nil
}
