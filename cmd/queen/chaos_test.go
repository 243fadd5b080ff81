package main

// The fault-schedule test: three `queen serve` processes (in network
// namespaces when the machine allows, else on loopback), clients that push,
// pop, ack and nack with unique transaction ids and read messages back
// through any node, and a nemesis that applies a seeded random schedule of
// kill -9, restarts, SIGSTOP pauses, leader kills, leadership transfers and
// (in namespaces) network partitions. With CHAOS_GROUPS above 1 a third of
// the pushes are split: they carry items for a second queue placed in
// another Raft group, and the schedule moves both queues live between
// groups, now and then with a kill -9 while one moves
// (chaos_move_test.go). Every operation is recorded with its
// call and answer times and what the client was told. After the schedule the
// faults are healed, group g is drained, every partition's final log is read
// with a fresh group (the audit), and the history is checked:
//
//   - by porcupine against the model in chaos_model_test.go, one partition at
//     a time (FIFO from the cursor, pops see every completed push, a
//     completed ack commits for good, the retry budget and dead-lettering,
//     leases exclusive while surely live, dedup, reads through followers
//     that see every push and ack completed before them, and nothing left
//     unconsumed after the drain);
//   - by counting (chaos_check_test.go): no queued push lost, no delivery
//     after a committing ack, one message id per transaction id, payloads
//     intact, dead letters filed, and no push item answered failed that
//     the log holds (failed-but-stored, want 0);
//   - by `queen check` on every stopped replica: equal digests.
//
// A seed fixes the schedule and every client's choices; the processes'
// timing is not reproducible, so a replay reproduces a failure often, not
// always. Every failure prints the seed and the command that replays it.
//
//	make chaos SEED=42 DURATION=10m             # or:
//	go test ./cmd/queen -run '^TestChaos$' -count=1 -v -args -chaos.seed=42 -chaos.duration=10m
//
// Porcupine is given a time budget per partition. A partition it cannot
// decide in time is INCONCLUSIVE, reported apart from an illegal one; the
// rule is that an inconclusive partition fails the test too (the history
// grew past what the model is sized for, which is itself worth a look), with
// a hint to raise -chaos.checktimeout.

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var (
	chaosSeedFlag     = flag.Uint64("chaos.seed", 0, "TestChaos: seed of the schedule and the clients (0: from CHAOS_SEED, else random)")
	chaosDurationFlag = flag.Duration("chaos.duration", 0, "TestChaos: how long the faults and the load run (0: from CHAOS_DURATION, else the short schedule)")
	chaosNetFlag      = flag.String("chaos.net", "", "TestChaos: netns, loopback or auto (empty: from CHAOS_NET, else auto: netns where it can run)")
	chaosCheckFlag    = flag.Duration("chaos.checktimeout", 0, "TestChaos: porcupine's budget per partition (0: 30s)")
	chaosFaultsFlag   = flag.String("chaos.faults", "", "TestChaos: comma-separated fault kinds to draw from (empty: from CHAOS_FAULTS, else all)")
)

const (
	chaosQueue = "chaos"
	chaosGroup = "g"
	// chaosSideQueue takes the second half of split pushes (CHAOS_GROUPS
	// above 1), in chaosSideParts partitions; nobody consumes it, the
	// audit reads it.
	chaosSideQueue = "chaos-side"
	chaosSideParts = 3
	// chaosShort is the load phase in `make test`: with start-up, the drain
	// and the checks the test stays under a minute.
	chaosShort = 24 * time.Second
)

// chaosConfig sizes a run.
type chaosConfig struct {
	duration       time.Duration // the load and the schedule
	net            string        // "netns" or "loopback"
	pushers        int
	consumers      int
	readers        int
	activeParts    int // partitions pushers add to at a time
	partCapacity   int // messages per partition, which bounds its history
	retryLimit     int
	lease          time.Duration
	requestTimeout time.Duration
	checkTimeout   time.Duration
	// moveSync: a move fault lasts until its move has answered, so that
	// no later fault overlaps it (TestChaos_Moves, chaos_move_test.go).
	moveSync bool
}

// chaosRun is one run: the cluster, the schedule, the history.
type chaosRun struct {
	t     *testing.T
	c     *cluster
	lab   partitioner // nil on loopback
	seed  uint64
	cfg   chaosConfig
	parts *partitions
	base  time.Time // of the history's monotonic times

	mu  sync.Mutex
	ops []*chaosOp

	batches   atomic.Int64
	emptyPops atomic.Int64
	reads     readTargets
	split     bool // pushes may carry items for chaosSideQueue, in another group
	faults    []faultRecord
	audit     map[string][]auditEntry // partition -> its log, in offset order
	auditIDs  map[string]string       // partition name -> UUID
	sideAudit map[string][]auditEntry // chaosSideQueue's partitions
	finalAt   time.Time

	// Joins (chaos_join_test.go).
	spawn        spawner
	secretFile   string
	joinMu       sync.Mutex
	joiner       *qnode       // the member a join fault started, until it has left
	joinerServes bool         // the joiner has answered /health 200: clients use it
	leave        *leaveResult // the joiner's leave, once a join fault asked it
	joiners      []*qnode     // every node a join fault started
	joinEvents   []string     // for the report
}

// spawner makes a node (not started) that joins the cluster through
// founder via (an index of the founders).
type spawner func(id string, via int) *qnode

// partitioner is what the nemesis needs of a network it can cut
// (chaos_netns_linux_test.go).
type partitioner interface {
	// cut applies a partition of kind around leader (an index, -1 if none
	// is known) and describes it.
	cut(kind faultKind, leader int, rng *rand.Rand) string
	heal()
}

func chaosSettings(t *testing.T) (seed uint64, duration time.Duration, netMode string) {
	seed, duration, netMode = *chaosSeedFlag, *chaosDurationFlag, *chaosNetFlag
	if seed == 0 {
		if v := os.Getenv("CHAOS_SEED"); v != "" {
			s, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("CHAOS_SEED=%q: %v", v, err)
			}
			seed = s
		}
	}
	if seed == 0 {
		seed = rand.Uint64()%1_000_000_000 + 1
	}
	if duration == 0 {
		if v := os.Getenv("CHAOS_DURATION"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("CHAOS_DURATION=%q: %v", v, err)
			}
			duration = d
		}
	}
	if duration == 0 {
		duration = chaosShort
	}
	if netMode == "" {
		netMode = os.Getenv("CHAOS_NET")
	}
	if netMode == "" {
		netMode = "auto"
	}
	return seed, duration, netMode
}

// TestChaos runs one seeded fault schedule against a three-node cluster and
// checks the recorded history (see the top of this file).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault-schedule test (about 50 s); skipped with -short")
	}
	t.Parallel() // TestChaos_Moves and TestChaos_Joins are not: they set CHAOS_GROUPS and CHAOS_FAULTS
	seed, duration, netMode := chaosSettings(t)
	runChaos(t, seed, duration, netMode, "")
}

// TestChaos_Moves is the short schedule over three groups
// (CHAOS_GROUPS=3 unless set above 1), drawn from moves, kills, restarts
// and leadership transfers, with at least one move: `make test` moves a queue
// live under load and checks the history as TestChaos does. Moves (and
// transfers) are drawn twice as often as kills and restarts; half of the
// moves kill a group leader while they run. -chaos.faults or CHAOS_FAULTS replace the kinds.
//
// Bounded for CI: a move fault lasts until its move answers (moveSync), so
// no later kill or restart orphans it (its queue would stay frozen for
// MoveTimeout, 5 min).
func TestChaos_Moves(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault-schedule test with queue moves (about 50 s); skipped with -short")
	}
	chaosVariant(t, "move,kill,kill-leader,restart,transfer", "")
	seed, duration, netMode := chaosSettings(t)
	runChaos(t, seed, duration, netMode, faultMove)
}

// chaosVariant sets a variant's defaults where no flag and no variable
// does: three groups, the fault kinds, and the duration unless "".
func chaosVariant(t *testing.T, faults, duration string) {
	if chaosGroups() <= 1 {
		t.Setenv("CHAOS_GROUPS", "3")
	}
	if *chaosFaultsFlag == "" && os.Getenv("CHAOS_FAULTS") == "" {
		t.Setenv("CHAOS_FAULTS", faults)
	}
	if duration != "" && *chaosDurationFlag == 0 && os.Getenv("CHAOS_DURATION") == "" {
		t.Setenv("CHAOS_DURATION", duration)
	}
}

// TestChaos_Joins is a 40 s schedule (unless -chaos.duration or
// CHAOS_DURATION says otherwise) over three groups (CHAOS_GROUPS=3 unless
// set above 1) with joins and leaves among its faults
// (chaos_join_test.go): its first fault starts a fourth node with --join,
// for an even seed its last asks it to leave, and the others are drawn
// from joins, moves, kills, restarts and leadership transfers (and
// partitions in namespaces). The 40 s give the directory the time to move
// replicas onto the joiner under the faults (some 10-20 s). The history is
// checked as TestChaos does; each group's replicas are compared among its
// voters. -chaos.faults or CHAOS_FAULTS replace the kinds. Moves are
// bounded as in TestChaos_Moves (moveSync).
func TestChaos_Joins(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault-schedule test with joins and leaves (about 70 s); skipped with -short")
	}
	chaosVariant(t, "join,move,kill,kill-leader,restart,transfer,partition-minority,partition-majority", "40s")
	seed, duration, netMode := chaosSettings(t)
	runChaos(t, seed, duration, netMode, faultJoin)
}

// chaosRegressions are the schedules that found bugs. Each is minutes long,
// so `make test` runs only the three short schedules and each bug's own
// deterministic test; `make chaos-regressions` replays these.
var chaosRegressions = []struct {
	seed     uint64
	duration time.Duration
	groups   int    // CHAOS_GROUPS for the run (0: one group)
	faults   string // CHAOS_FAULTS for the run ("": chaosRegressionFaults)
	net      string // the network ("": auto)
	found    string
}{
	{1001, 10 * time.Minute, 0, "", "", "a node's SIGTERM hung about 9m25s in (twice in two runs): hashicorp/raft's pipelined " +
		"replication deadlocked (raft/transport.go transportInFlight; TestNetworkTransport_NoPipeline)"},
	{564830666, 5 * time.Minute, 3, "", "", "a restart's SIGTERM reached a node of three groups while it opened its stores, " +
		"and the default action killed it (cmd/queen/serve.go; TestServe_SIGTERMWhileOpeningStopsCleanly); later, " +
		"two restarts in a row signalled a process before it reached serve (harness_test.go waitStarting)"},
	{445495518, 5 * time.Minute, 3, "", "", "an ack through a node whose group replica lagged behind the pop was sent to group 1 " +
		"and answered \"partition not found\": first after a 1 s wait for the replica, then, asking the leaders, when " +
		"no leader was known yet (cluster/hostbroker.go lookup; TestHost_AsksTheLeadersForAPartitionItsReplicasLack)"},
	{2222, 2 * time.Minute, 3, "kill,kill-leader,move,restart", "", "a restart's SIGTERM reached a node while a queue was frozen " +
		"by a move: the requests it held for the queue (raft retryMoving, up to MoveWait, 30 s) outlived serve's 10 s " +
		"shutdown deadline and serve exited 1, three times in the run (cluster/hostmove.go Host.StopWaiting, called by " +
		"server.Shutdown; TestHost_StopWaitingAnswersCommandsOnAFrozenQueue)"},
	{31337, 8 * time.Minute, 3, "kill,kill-leader,restart,pause,pause-leader,transfer,move,join", "loopback", "a split push " +
		"whose part's relay lost its answer when a group's leader was killed was retried, and its items were answered " +
		"duplicate of the messages the lost attempt stored: a client told duplicate of a push it sent once " +
		"(cluster/hostrelay.go attempt.ownDuplicates; TestHost_SplitPushAnswersFailedOnlyWhenNotStored)"},
	{819321041, 40 * time.Second, 3, "join,kill,kill-leader,move,partition-majority,partition-minority,restart,transfer", "netns",
		"a read through a node that hosted a moved queue's source group but not its target, between the flip and the " +
			"source copy's drop, read the copy as it was at the freeze and answered found=false for a message pushed since " +
			"(cluster/hostread.go heldBy; TestHost_ReadThroughTheSourceAfterTheFlip); and every linearizable read through " +
			"a restarted node waited 5 s, then 503, for a replica a replica step had removed from its group " +
			"(server/relay/reads.go CatchUp; TestReads_StopsWaitingForAReplicaNoLongerHosted)"},
	{696684825, 3 * time.Minute, 3, "kill,kill-leader,restart,pause,pause-leader,partition-minority,partition-majority," +
		"partition-bridge,transfer,move,join,wipe", "netns",
		"a wipe 17 s after another (seed 662035008 too): the first's forced leave had left a data group with two voters, " +
			"its third not yet placed on the rejoined store, and the second wiped one of the two; the group had no " +
			"quorum for good and the forced leave answered no_leader (cmd/queen/chaos_wipe_test.go: a wipe waits for " +
			"every group to have three voters again; README runbook step 3)"},
	{984274746, 24 * time.Second, 0, "kill,kill-leader,restart,pause,pause-leader,partition-minority,partition-majority," +
		"partition-bridge,transfer,wipe", "netns",
		"a wiped node rejoined and was made a voter, then its leader sent it the same snapshot again: hashicorp/raft " +
			"installed it and set the node's configuration back to the snapshot's, without the node, for good, so it " +
			"never stood for election and its /health said it was no member (raft/snapshotrule.go, Raft's " +
			"InstallSnapshot rule 6; TestNode_AnsweringASnapshotItHoldsKeepsTheConfiguration)"},
}

// chaosRegressionFaults are the kinds the schedules of chaosRegressions
// were drawn from: kinds added since (transfer) would draw other schedules
// from the same seeds.
const chaosRegressionFaults = "kill,kill-leader,restart,pause,pause-leader,partition-minority,partition-majority,partition-bridge"

// TestChaos_Regressions replays chaosRegressions when CHAOS_REGRESSIONS is
// set.
func TestChaos_Regressions(t *testing.T) {
	if os.Getenv("CHAOS_REGRESSIONS") == "" {
		t.Skip("replays the schedules that found bugs, minutes each: make chaos-regressions (CHAOS_REGRESSIONS=1)")
	}
	for _, reg := range chaosRegressions {
		t.Run(fmt.Sprint(reg.seed), func(t *testing.T) {
			t.Logf("found: %s", reg.found)
			if reg.groups > 0 {
				t.Setenv("CHAOS_GROUPS", strconv.Itoa(reg.groups))
			}
			if *chaosFaultsFlag == "" && os.Getenv("CHAOS_FAULTS") == "" {
				t.Setenv("CHAOS_FAULTS", cmp.Or(reg.faults, chaosRegressionFaults))
			}
			runChaos(t, reg.seed, reg.duration, cmp.Or(reg.net, "auto"), "")
		})
	}
}

// runChaos runs one schedule; must, when not empty, is a fault kind the
// schedule must hold (its first fault becomes one if none was drawn).
func runChaos(t *testing.T, seed uint64, duration time.Duration, netMode string, must faultKind) {
	cfg := chaosConfig{duration: duration, pushers: 3, consumers: 4, readers: 2, activeParts: 3, partCapacity: 30,
		retryLimit: 1, lease: 3 * time.Second, requestTimeout: 4 * time.Second, checkTimeout: 30 * time.Second}
	if *chaosCheckFlag > 0 {
		cfg.checkTimeout = *chaosCheckFlag
	}
	cfg.moveSync = must == faultMove || must == faultJoin
	r := &chaosRun{t: t, seed: seed, cfg: cfg, parts: newPartitions(cfg.activeParts, cfg.partCapacity)}
	r.startCluster(netMode)
	cfg.net = r.cfg.net
	r.cfg = cfg
	only := chaosFaultFilter(t)
	env := ""
	if g := chaosGroups(); g > 1 {
		env = fmt.Sprintf("CHAOS_GROUPS=%d ", g)
	}
	// make chaos runs TestChaos, which does not force a move into the
	// schedule as TestChaos_Moves does: go test replays that exactly.
	replay := fmt.Sprintf("%smake chaos SEED=%d DURATION=%v NET=%s", env, seed, duration, cfg.net)
	goReplay := fmt.Sprintf("%sgo test ./cmd/queen -run '^%s$' -count=1 -v -args -chaos.seed=%d -chaos.duration=%v -chaos.net=%s",
		env, t.Name(), seed, duration, cfg.net)
	if len(only) > 0 {
		var kinds []string
		for k := range only {
			kinds = append(kinds, string(k))
		}
		sort.Strings(kinds)
		replay += " FAULTS=" + strings.Join(kinds, ",")
		goReplay += " -chaos.faults=" + strings.Join(kinds, ",")
	}
	t.Logf("CHAOS seed %d, duration %v, network %s; replay: %s", seed, duration, cfg.net, replay)
	t.Cleanup(func() {
		if t.Failed() {
			r.saveArtifacts()
			t.Logf("CHAOS FAILED with seed %d. Replay it with:\n    %s\n  or: %s", seed, replay, goReplay)
		}
	})

	r.c.waitLeader(r.c.nodes, 60*time.Second)
	r.configure()
	r.base = time.Now()
	schedule := chaosSchedule(seed, duration, r.lab != nil, chaosGroups(), only)
	if must != "" && !slices.ContainsFunc(schedule, func(f fault) bool { return f.kind == must }) && len(schedule) > 0 {
		schedule[0].kind = must // the short variant's point: at least one
	}
	if must == faultJoin && len(schedule) > 1 {
		// A join first. With an even seed the last fault is another, the
		// joiner's leave, once the directory has moved replicas onto it
		// (settleJoins awaits it); with an odd one the joiner stays, and
		// the end checks that it holds its share and compares it too.
		schedule[0].kind = faultJoin
		if seed%2 == 0 {
			schedule[len(schedule)-1].kind = faultJoin
		}
	}

	stopPush, stopPop := make(chan struct{}), make(chan struct{})
	var pushWG, popWG sync.WaitGroup
	var once sync.Once
	stopLoad := func() {
		once.Do(func() {
			close(stopPush)
			pushWG.Wait()
			close(stopPop)
			popWG.Wait()
		})
	}
	defer stopLoad() // no client outlives the test, whatever fails first
	for i := range cfg.pushers {
		pushWG.Go(func() { r.pusher(i, stopPush) })
	}
	for i := range cfg.consumers {
		popWG.Go(func() { r.consumer(100+i, stopPop) })
	}
	for i := range cfg.readers {
		popWG.Go(func() { r.reader(200+i, stopPop) })
	}
	r.runSchedule(schedule)
	time.Sleep(time.Until(r.base.Add(duration)))
	r.healAll()
	stopLoad()
	t.Logf("load stopped at +%v: %d operations recorded", r.since(time.Now()), len(r.ops))

	r.settleMoves()
	r.settleJoins()
	r.c.waitConverged(r.c.nodes, 90*time.Second)
	r.drainAndAudit()
	r.check()
	if g := chaosGroups(); g > 1 {
		r.c.stopAndCompareGroups(g)
	} else {
		r.c.stopAndCompare(r.c.nodes, 60*time.Second)
	}
	t.Logf("done at +%v", r.since(time.Now()))
}

func (r *chaosRun) since(at time.Time) time.Duration { return at.Sub(r.base).Round(time.Millisecond) }

// startCluster starts three nodes in network namespaces, or on loopback
// when asked or when namespaces cannot be built here, and sets r.c, r.lab,
// r.cfg.net and, with groups, what join faults need. Snapshots are taken
// often so that restarts, lagging followers and joiners go through them.
func (r *chaosRun) startCluster(netMode string) {
	t := r.t
	// Debug logging puts Raft's elections and snapshot installs in the node
	// logs a failed run keeps.
	extra := []string{"--snapshot-threshold", "256", "--trailing-logs", "64", "--snapshot-interval", "1s", "--log-level", "debug"}
	// The secret: joins and leaves (join and wipe faults) need it.
	r.secretFile = writeSecret(t, "chaos secret")
	extra = append(extra, "--cluster-secret-file", r.secretFile)
	groups := chaosGroups() > 1
	if groups {
		// The same schedule over a cluster that spreads its queue over
		// Raft groups: routing, relays and the directory under faults.
		extra = append(extra, "--groups", strconv.Itoa(chaosGroups()), "--retire-hold", chaosRetireHold)
	}
	switch netMode {
	case "auto", "netns":
		c, lab, spawn, why := startNetnsChaos(t, groups, extra...)
		if c != nil {
			r.c, r.lab, r.spawn, r.cfg.net = c, lab, spawn, "netns"
			return
		}
		if netMode == "netns" {
			t.Skip("CHAOS_NET=netns: ", why)
		}
		t.Logf("network partitions are left out of the schedule: %s; the cluster runs on loopback", why)
	case "loopback":
	default:
		t.Fatalf("chaos network %q: want netns, loopback or auto", netMode)
	}
	r.c, r.cfg.net = startLoopback(t, 3, extra...), "loopback"
	r.spawn = func(id string, via int) *qnode {
		ports := freePorts(t, 2)
		httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		return r.c.newNode(id, httpAddr, nil, append([]string{"--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[1]),
			"--retention-interval", "0", "--join", r.c.nodes[via].url("")}, extra...)...)
	}
}

// chaosGroups is CHAOS_GROUPS: run the nodes with --groups (0 or 1: one
// group, as `make chaos` does).
func chaosGroups() int {
	g, _ := strconv.Atoi(os.Getenv("CHAOS_GROUPS"))
	return g
}

// configure creates the queue with a small retry budget, so that failed
// nacks reach the dead-letter branch often. On groups it is placed in the
// last group by configure's raftGroup (the directory would choose group
// 1), whose leader the kill-leader and pause-leader faults, which aim at
// the directory's, hit when it is the same node; and chaosSideQueue is
// placed in group 1, so that a push with items for both is split.
func (r *chaosRun) configure() {
	configure := func(queue, placed string) {
		body := fmt.Sprintf(`{"queue":%q%s,"options":{"retryLimit":%d}}`, queue, placed, r.cfg.retryLimit)
		waitFor(r.t, 30*time.Second, "configure "+queue, func() (bool, string) {
			code, b, err := r.c.do(5*time.Second, "POST", r.c.nodes[0].url("/api/v1/configure"), []byte(body))
			return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v %s", code, err, b)
		})
	}
	g := chaosGroups()
	if g <= 1 {
		configure(chaosQueue, "")
		return
	}
	configure(chaosQueue, fmt.Sprintf(`,"raftGroup":%d`, g))
	configure(chaosSideQueue, `,"raftGroup":1`)
	r.split = true
}

// Faults.

type faultKind string

const (
	faultKill        faultKind = "kill"        // kill -9 a random node, start it again after the hold
	faultKillLeader  faultKind = "kill-leader" // kill -9 the leader, start it again after the hold
	faultRestart     faultKind = "restart"     // SIGTERM a random node and start it again at once
	faultPause       faultKind = "pause"       // SIGSTOP a random node, SIGCONT after the hold
	faultPauseLeader faultKind = "pause-leader"
	// transfer: POST /api/v1/system/leadership/transfer to a node that
	// leads a group (with --groups, any group), again every 0.3-0.8 s
	// until the hold ends: leaders hand over under load.
	faultTransfer faultKind = "transfer"
	// Partitions (namespaces only). minority: a follower alone, the leader
	// keeps its quorum; majority: the leader alone, the other two must
	// elect; bridge: two nodes cannot reach each other but both reach the
	// third.
	faultMinority faultKind = "partition-minority"
	faultMajority faultKind = "partition-majority"
	faultBridge   faultKind = "partition-bridge"
	// move (CHAOS_GROUPS above 1 only): POST
	// /api/v1/system/queues/{queue}/move of a workload queue to another
	// group, on a goroutine (it may overlap the faults that follow); half
	// the time the leader of its source or target group is killed -9 a
	// moment later and started again after the hold (chaos_move_test.go).
	faultMove faultKind = "move"
	// move-orphan: a move whose own node is killed -9 a moment after it
	// is asked. The queue stays frozen until the directory's leader undoes
	// the move, MoveTimeout (5 min) after it began, so this kind is drawn
	// only when -chaos.faults names it.
	faultMoveOrphan faultKind = "move-orphan"
	// join (CHAOS_GROUPS above 1 only): when no joiner is a member, start
	// a new node (n4, n5, ...) with --join through a random founder; the
	// directory then moves replicas onto it while the schedule goes on.
	// When one is, `queen leave` it, on a goroutine (its replicas move
	// away first), then stop it (chaos_join_test.go).
	faultJoin faultKind = "join"
	// wipe: kill -9 a founder,
	// delete its data directory and start it
	// again with the same flags (a StatefulSet pod given a new volume). It
	// must refuse to start, since the others hold the cluster's state (a
	// lost disk never votes: raft/identity.go); after the hold, `queen leave
	// --force` removes its old store through another node and it starts
	// again with --join, as a new member that catches up (chaos_wipe_test.go).
	faultWipe faultKind = "wipe"
)

// fault is one step of a schedule.
type fault struct {
	kind faultKind
	at   time.Duration // from the start of the load
	hold time.Duration
	pick uint64 // chooses the target among the eligible nodes
}

type faultRecord struct {
	fault
	target          string
	applied, healed time.Duration
	skipped         string      // why the fault could not be applied
	move            *moveResult // move and move-orphan: what was asked and told
}

// chaosSchedule draws the schedule of a seed: faults one after another, from
// 3 s into the load to 1 s before its end, each held 1-4 s (partitions 2-5
// s) with 0.5-2.5 s of calm between them.
//
// only, when not empty, keeps the kinds it names (a schedule focused on
// some faults; the same seed then draws another schedule). Moves are drawn
// and joins only with groups above 1, move-orphan only when only names it.
func chaosSchedule(seed uint64, duration time.Duration, partitions bool, groups int, only map[faultKind]bool) []fault {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973)) // "nemesis": a stream of its own
	var kinds []faultKind
	all := []faultKind{faultKill, faultKillLeader, faultRestart, faultPause, faultPauseLeader,
		faultMinority, faultMajority, faultBridge, faultMinority, faultMajority, faultBridge, faultTransfer, faultTransfer}
	if groups > 1 {
		// After the kinds above, so that a seed's schedule without groups
		// is the one it drew before moves existed.
		all = append(all, faultMove, faultMove, faultMoveOrphan, faultJoin)
	}
	// Last, so that the kinds above draw what they drew before wipes.
	all = append(all, faultWipe)
	for _, k := range all {
		isPartition := k == faultMinority || k == faultMajority || k == faultBridge
		if (partitions || !isPartition) && (len(only) == 0 || only[k]) && (k != faultMoveOrphan || only[k]) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	var out []fault
	at := 3 * time.Second
	for {
		f := fault{kind: kinds[rng.IntN(len(kinds))], at: at, pick: rng.Uint64()}
		switch f.kind {
		case faultRestart:
		case faultMinority, faultMajority, faultBridge:
			f.hold = 2*time.Second + time.Duration(rng.IntN(3000))*time.Millisecond
		default:
			f.hold = time.Second + time.Duration(rng.IntN(3000))*time.Millisecond
		}
		if at+f.hold > duration-time.Second {
			return out
		}
		out = append(out, f)
		at += f.hold + 500*time.Millisecond + time.Duration(rng.IntN(2000))*time.Millisecond
	}
}

// chaosFaultFilter reads -chaos.faults (or CHAOS_FAULTS).
func chaosFaultFilter(t *testing.T) map[faultKind]bool {
	v := *chaosFaultsFlag
	if v == "" {
		v = os.Getenv("CHAOS_FAULTS")
	}
	if v == "" {
		return nil
	}
	known := map[faultKind]bool{faultKill: true, faultKillLeader: true, faultRestart: true, faultPause: true,
		faultPauseLeader: true, faultMinority: true, faultMajority: true, faultBridge: true, faultTransfer: true,
		faultMove: true, faultMoveOrphan: true, faultJoin: true, faultWipe: true}
	only := map[faultKind]bool{}
	for _, k := range strings.Split(v, ",") {
		if !known[faultKind(k)] {
			t.Fatalf("chaos fault kind %q: want some of kill, kill-leader, restart, pause, pause-leader, "+
				"partition-minority, partition-majority, partition-bridge, transfer, move, move-orphan, join, wipe", k)
		}
		if (k == string(faultMove) || k == string(faultMoveOrphan) || k == string(faultJoin)) && chaosGroups() <= 1 {
			t.Fatalf("chaos fault kind %s moves queues or replicas between Raft groups: set CHAOS_GROUPS above 1", k)
		}
		only[faultKind(k)] = true
	}
	t.Logf("faults drawn only from %s", v)
	return only
}

// runSchedule applies the faults in turn, on the test goroutine.
func (r *chaosRun) runSchedule(schedule []fault) {
	for _, f := range schedule {
		time.Sleep(time.Until(r.base.Add(f.at)))
		rec := faultRecord{fault: f, applied: r.since(time.Now())}
		heal := r.apply(&rec)
		time.Sleep(f.hold)
		if heal != nil {
			heal()
		}
		rec.healed = r.since(time.Now())
		r.faults = append(r.faults, rec)
		move := ""
		if rec.move != nil {
			move = rec.move.String()
		}
		r.t.Logf("fault %-18s %-10s +%v .. +%v %s%s", f.kind, rec.target, rec.applied, rec.healed, rec.skipped, move)
	}
}

// apply applies a fault and returns what heals it (nil: nothing to heal).
// Its targets are the members: the founders and a joiner, except that a
// joiner on its way out is never stopped or killed (its leave stops it).
func (r *chaosRun) apply(rec *faultRecord) func() {
	rng := rand.New(rand.NewPCG(rec.pick, 0))
	nodes := r.members()
	leader := r.findLeader(nodes)
	target := nodes[rng.IntN(len(nodes))]
	switch rec.kind {
	case faultKillLeader, faultPauseLeader, faultMajority:
		if leader < 0 {
			rec.skipped = "(no leader known: a random node instead)"
		} else {
			target = nodes[leader]
		}
	case faultMinority:
		var followers []*qnode
		for i, n := range nodes {
			if i != leader {
				followers = append(followers, n)
			}
		}
		target = followers[rng.IntN(len(followers))]
	}
	stops := rec.kind == faultKill || rec.kind == faultKillLeader || rec.kind == faultRestart || rec.kind == faultPause || rec.kind == faultPauseLeader
	if stops && r.isLeaving(target) {
		target = r.c.nodes[rng.IntN(len(r.c.nodes))]
		rec.skipped += "(the joiner is leaving: a founder instead)"
	}
	if rec.kind == faultWipe && !slices.Contains(r.c.nodes, target) {
		target = r.c.nodes[rng.IntN(len(r.c.nodes))]
		rec.skipped += "(a founder, not the joiner)"
	}
	rec.target = target.id
	switch rec.kind {
	case faultMove, faultMoveOrphan:
		return r.startMove(rec, rng)
	case faultJoin:
		return r.joinOrLeave(rec, rng)
	case faultWipe:
		return r.wipe(rec, target, rng)
	case faultTransfer:
		return r.transfers(rec, rng)
	case faultKill, faultKillLeader:
		target.kill()
		return target.start
	case faultRestart:
		target.stop()
		target.start()
		return nil
	case faultPause, faultPauseLeader:
		if err := target.signal(syscall.SIGSTOP); err != nil {
			r.t.Fatalf("SIGSTOP %s: %v", target.id, err)
		}
		return func() {
			if err := target.signal(syscall.SIGCONT); err != nil {
				r.t.Fatalf("SIGCONT %s: %v", target.id, err)
			}
		}
	default:
		// nodes is the founders, then the joiner, in the order of the
		// lab's namespaces.
		idx := slices.Index(nodes, target)
		if rec.kind == faultBridge {
			idx = leader
		}
		rec.target = r.lab.cut(rec.kind, idx, rng)
		return r.lab.heal
	}
}

// transferPath asks the node it reaches to hand over every group it leads.
const transferPath = "/api/v1/system/leadership/transfer"

// transfers runs the transfer fault until the returned function is called:
// a transfer on a node that leads a group, again and again.
func (r *chaosRun) transfers(rec *faultRecord, rng *rand.Rand) func() {
	stop, done := make(chan struct{}), make(chan struct{})
	var posts, moved int
	var refused []string
	go func() {
		defer close(done)
		for {
			if n := r.someLeader(rng); n != nil {
				posts++
				code, b, err := r.c.do(10*time.Second, "POST", n.url(transferPath), nil)
				var res struct {
					Transferred []uint32 `json:"transferred"`
				}
				switch {
				case err == nil && code == http.StatusOK && json.Unmarshal(b, &res) == nil:
					moved += len(res.Transferred)
				case err == nil:
					e, _ := c2(b)
					refused = append(refused, fmt.Sprintf("%s %d %s", n.id, code, e.Code))
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(300+rng.IntN(500)) * time.Millisecond):
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		rec.target = fmt.Sprintf("leaders: %d asks, %d groups moved", posts, moved)
		if len(refused) > 0 {
			rec.skipped = "refused: " + strings.Join(refused, ", ")
		}
	}
}

// someLeader is a random node among those that lead a Raft group (nil
// when none answers so).
func (r *chaosRun) someLeader(rng *rand.Rand) *qnode {
	var leaders []*qnode
	for _, n := range r.members() {
		code, b, err := r.c.do(time.Second, "GET", n.url("/health"), nil)
		var h struct {
			Role   string `json:"role"`
			Groups []struct {
				Role string `json:"role"`
			} `json:"groups"`
		}
		if err != nil || code == 0 || json.Unmarshal(b, &h) != nil {
			continue
		}
		leads := h.Role == "leader"
		for _, g := range h.Groups {
			leads = leads || g.Role == "leader"
		}
		if leads {
			leaders = append(leaders, n)
		}
	}
	if len(leaders) == 0 {
		return nil
	}
	return leaders[rng.IntN(len(leaders))]
}

// healAll ends every fault: all nodes running and resumed, the network whole.
func (r *chaosRun) healAll() {
	if r.lab != nil {
		r.lab.heal()
	}
	for _, n := range r.members() {
		if n.running() {
			n.signal(syscall.SIGCONT)
		} else {
			n.start()
		}
	}
}

// signal sends sig to the node's process.
func (n *qnode) signal(sig syscall.Signal) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil || isClosed(exited) {
		return fmt.Errorf("%s is not running", n.id)
	}
	return cmd.Process.Signal(sig)
}

// findLeader asks every node of nodes at once and returns the index of the
// one that reports role leader in the highest term, -1 if none answers so.
func (r *chaosRun) findLeader(nodes []*qnode) int {
	type answer struct {
		i int
		h health
	}
	answers := make(chan answer, len(nodes))
	for i, n := range nodes {
		go func() {
			code, b, err := r.c.do(time.Second, "GET", n.url("/health"), nil)
			var h health
			if err == nil && json.Unmarshal(b, &h) == nil {
				h.Code = code
			}
			answers <- answer{i, h}
		}()
	}
	best, term := -1, uint64(0)
	for range nodes {
		a := <-answers
		if a.h.Role == "leader" && a.h.Term >= term {
			best, term = a.i, a.h.Term
		}
	}
	return best
}

// Drain and audit.

type auditEntry struct {
	txid, msgID string
}

// drainAndAudit consumes everything left for group g (recording those
// operations too), reads every partition's log with a fresh group, and
// repeats both while the audit finds messages that landed after the last
// drain (an unknown push applied late).
func (r *chaosRun) drainAndAudit() {
	r.audit, r.auditIDs, r.sideAudit = map[string][]auditEntry{}, map[string]string{}, map[string][]auditEntry{}
	deadline := time.Now().Add(120 * time.Second)
	for round := 1; ; round++ {
		r.drain(deadline)
		r.finalAt = time.Now()
		if fresh := r.readAudit(deadline); fresh == 0 && round > 1 {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("drain and audit did not settle in 120s")
		}
	}
	total := 0
	for _, l := range r.audit {
		total += len(l)
	}
	r.t.Logf("drained and audited by +%v: %d messages in %d partitions", r.since(time.Now()), total, len(r.audit))
}

// drain pops (wildcard) and acks completed until a pop finds nothing and
// group g's cursors show no lag and no live lease anywhere.
func (r *chaosRun) drain(deadline time.Time) {
	rng := rand.New(rand.NewPCG(r.seed, 0xd7a1))
	for {
		if time.Now().After(deadline) {
			r.t.Fatalf("drain: group %s still has pending messages or live leases", chaosGroup)
		}
		op := &chaosOp{client: -1, kind: opPop, batch: 50, wildcard: true}
		q := url.Values{"batch": {"50"}, "consumerGroup": {chaosGroup}, "leaseSeconds": {fmt.Sprint(int(r.cfg.lease / time.Second))}}
		b := r.exchange(op, r.randomNode(rng), r.cfg.requestTimeout, "GET", "/api/v1/pop/queue/"+chaosQueue+"?"+q.Encode(), nil)
		switch {
		case op.result == resOK && op.code == http.StatusOK:
			if !r.decodePop(op, b) {
				op.result = resUnknown
			}
			r.record(op)
			if op.result == resOK {
				statuses := make([]string, len(op.txids))
				for i := range statuses {
					statuses[i] = "completed"
				}
				r.ack(-1, rng, op, 0, statuses, false)
			}
			continue
		case op.result == resOK:
			if pending := r.pending(); pending == "" {
				return
			} else if time.Now().After(deadline.Add(-5 * time.Second)) {
				r.t.Logf("drain: %s", pending)
			}
		default:
			r.record(op)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pending describes group g's unfinished partitions on the leader ("" when
// none has lag or a live lease).
func (r *chaosRun) pending() string {
	nodes := r.members()
	leader := r.findLeader(nodes)
	if leader < 0 {
		return "no leader"
	}
	code, b, err := r.c.do(5*time.Second, "GET", nodes[leader].url("/api/v1/consumer-groups/"+chaosGroup), nil)
	if err != nil || code != http.StatusOK {
		return fmt.Sprintf("consumer group %s: %d %v", chaosGroup, code, err)
	}
	var detail map[string]struct {
		Partitions []struct {
			Partition   string `json:"partition"`
			OffsetLag   int64  `json:"offsetLag"`
			LeaseActive bool   `json:"leaseActive"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &detail); err != nil {
		return fmt.Sprintf("consumer group %s: %v: %s", chaosGroup, err, b)
	}
	var busy []string
	for _, p := range detail[chaosQueue].Partitions {
		if p.OffsetLag > 0 || p.LeaseActive {
			busy = append(busy, fmt.Sprintf("%s (lag %d, lease %v)", p.Partition, p.OffsetLag, p.LeaseActive))
		}
	}
	return strings.Join(busy, ", ")
}

// readAudit pops every partition pushers used with group "audit" and
// autoAck, appending to r.audit (r.sideAudit for chaosSideQueue) what it
// had not read yet; it returns how many messages were new.
func (r *chaosRun) readAudit(deadline time.Time) int {
	fresh := 0
	for _, part := range r.parts.names() {
		fresh += r.auditPartition(deadline, chaosQueue, part, r.audit)
	}
	if r.split {
		for i := range chaosSideParts {
			fresh += r.auditPartition(deadline, chaosSideQueue, fmt.Sprintf("s%d", i), r.sideAudit)
		}
	}
	return fresh
}

func (r *chaosRun) auditPartition(deadline time.Time, queue, part string, into map[string][]auditEntry) int {
	fresh := 0
	for {
		if time.Now().After(deadline) {
			r.t.Fatalf("audit of partition %s/%s did not finish", queue, part)
		}
		path := fmt.Sprintf("/api/v1/pop/queue/%s/partition/%s?consumerGroup=audit&autoAck=true&batch=10000", queue, part)
		code, b, err := r.c.do(10*time.Second, "GET", r.c.nodes[0].url(path), nil)
		if err != nil || code >= 500 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if code == http.StatusNoContent {
			return fresh
		}
		var pr chaosPop
		if code != http.StatusOK || json.Unmarshal(b, &pr) != nil {
			r.t.Fatalf("audit pop of %s/%s: %d %s", queue, part, code, b)
		}
		for _, m := range pr.Messages {
			into[part] = append(into[part], auditEntry{m.TransactionID, m.ID})
			if queue == chaosQueue {
				r.auditIDs[part] = m.PartitionID
			}
		}
		fresh += len(pr.Messages)
	}
}

// Report.

// saveArtifacts keeps what a failed run leaves for a post-mortem, outside
// the test's temporary directory: the history (one operation a line), each
// node's log and a copy of each node's data directory.
func (r *chaosRun) saveArtifacts() {
	dir, err := os.MkdirTemp("", fmt.Sprintf("queen-chaos-%d-", r.seed))
	if err != nil {
		r.t.Logf("keep artifacts: %v", err)
		return
	}
	var b strings.Builder
	r.mu.Lock()
	for _, op := range r.ops {
		fmt.Fprintf(&b, "#%d %s c%d via %s [%v, %v] %s %q part=%s batch=%d repush=%v lease=%s txids=%v statuses=%v msgIDs=%v acks=%+v",
			op.id, op.kind, op.client, op.node, r.since(op.call), r.since(op.ret), op.result, op.detail, op.part, op.batchID,
			op.repush, op.lease, op.txids, op.statuses, op.msgIDs, op.acks)
		switch {
		case op.kind == opRead:
			fmt.Fprintf(&b, " found=%v consumed=%v", op.found, op.consumed)
		case len(op.sideTxids) > 0:
			fmt.Fprintf(&b, " side=%s/%s %v %v", chaosSideQueue, op.sidePart, op.sideTxids, op.sideStatuses)
		}
		b.WriteString("\n")
	}
	r.mu.Unlock()
	for _, f := range r.faults {
		move := ""
		if f.move != nil {
			move = f.move.String()
		}
		fmt.Fprintf(&b, "fault %s %s +%v .. +%v %s%s\n", f.kind, f.target, f.applied, f.healed, f.skipped, move)
	}
	os.WriteFile(filepath.Join(dir, "history.txt"), []byte(b.String()), 0o644)
	r.joinMu.Lock()
	nodes := append(slices.Clone(r.c.nodes), r.joiners...)
	r.joinMu.Unlock()
	for _, n := range slices.Compact(nodes) {
		if out, err := exec.Command("cp", "-a", n.logPath, n.dir, dir).CombinedOutput(); err != nil {
			r.t.Logf("keep %s: %v: %s", n.id, err, out)
		}
	}
	r.t.Logf("CHAOS artifacts (history, node logs, data directories): %s", dir)
}

// summary counts the history and the faults for the log.
func (r *chaosRun) summary() string {
	var b strings.Builder
	count := map[string]int{}
	for _, op := range r.ops {
		count[fmt.Sprintf("%s %s", op.kind, op.result)]++
	}
	var keys []string
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "%d operations (", len(r.ops))
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, count[k])
	}
	fmt.Fprintf(&b, "; %d empty pops not recorded)", r.emptyPops.Load())
	var found, consumed int
	via := map[string]int{}
	for _, op := range r.ops {
		if op.kind == opRead && op.result == resOK {
			via[op.node]++
			if op.found {
				found++
			}
			if op.consumed {
				consumed++
			}
		}
	}
	fmt.Fprintf(&b, "; reads answered: %d found (%d consumed by %s), via %v", found, consumed, chaosGroup, via)
	kinds := map[faultKind]int{}
	for _, f := range r.faults {
		kinds[f.kind]++
	}
	var fk []string
	for k, n := range kinds {
		fk = append(fk, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(fk)
	fmt.Fprintf(&b, "; %d faults (%s)%s", len(r.faults), strings.Join(fk, ", "), r.moveCounts())
	return b.String()
}
