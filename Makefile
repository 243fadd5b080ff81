# queen: a replicated message broker that speaks the Queen MQ HTTP API.
GO       ?= go
PKGS     ?= ./...
FUZZTIME ?= 30s
BENCHTIME ?= 1s

.PHONY: build test test-chaos test-short lint fuzz bench chaos chaos-regressions upgrade-test run cluster cluster-stop clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -o bin/queen ./cmd/queen

# The README's test command, in two phases. The unit packages first, side
# by side (go test runs two test binaries at once on two cores); then the
# process tests of cmd/queen alone, so that their clusters of `queen serve`
# processes do not compete with raft's and engine's race-instrumented
# binaries for the cores their timeouts assume. cmd/queen's tests build the
# nodes they start as the test binary is built (harness_test.go
# queenBinary): with -race and the invariants, so the cluster tests check
# the broker itself. Both phases run even when the first fails, as one go
# test ./... did.
# -race and the invariants tag turn on the costly checks; pebblegozstd keeps
# Pebble's cgo zstd (a C library, minutes to compile on a fresh machine, and
# unused: the stores compress no blocks) out of the race build.
# make test runs one fault schedule (TestChaos); make test-chaos runs the
# other two, and CI (.ci/run) runs both targets.
# go vet runs after the tests: it builds every package a second time (without
# -race), and the tests are what a newcomer waits for.
# -parallel 4: the parallel tests (raft's and server's clusters, cmd/queen's
# processes) mostly wait on timers and fsyncs: at the default (2, the cores)
# cmd/queen used half a core and took 305-560 s, at 4 a core and 215 s.
# GOTESTFLAGS adds go test flags to both phases (CI: -json, for the times).
GOTESTFLAGS ?=
TESTFLAGS = -race -tags invariants,pebblegozstd -timeout 20m -parallel 4 $(GOTESTFLAGS)
PROC_PKG  = github.com/queenmq/queen/cmd/queen
TEST_PKGS = $(shell $(GO) list $(PKGS))
CHAOS_MORE = ^TestChaos_(Moves|Joins)$$
test:
	@st=0; \
	unit="$(filter-out $(PROC_PKG),$(TEST_PKGS))"; proc="$(filter $(PROC_PKG),$(TEST_PKGS))"; \
	if [ -n "$$unit" ]; then echo "$(GO) test $(TESTFLAGS) <the packages but cmd/queen>"; $(GO) test $(TESTFLAGS) $$unit || st=1; fi; \
	if [ -n "$$proc" ]; then echo "$(GO) test $(TESTFLAGS) -skip '$(CHAOS_MORE)' $$proc"; $(GO) test $(TESTFLAGS) -skip '$(CHAOS_MORE)' $$proc || st=1; fi; \
	exit $$st
	$(GO) vet $(PKGS)

# The fault schedules make test leaves out (TestChaos_Moves, TestChaos_Joins;
# about a minute each), with the race detector and the invariants as in
# make test. CI runs this after make test.
test-chaos:
	$(GO) test $(TESTFLAGS) -count=1 -run '$(CHAOS_MORE)' ./cmd/queen

test-short:
	$(GO) test -short -tags invariants,pebblegozstd $(PKGS)

# staticcheck is pinned and fetched by go run (module cache), not a tool
# dependency of the module.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt wants to rewrite:"; echo "$$out"; exit 1; fi
	$(STATICCHECK) $(PKGS)
	$(GO) test -count=1 -run TestImports ./

# Each fuzz target for FUZZTIME (go test allows one target per run).
# -fuzzminimizetime keeps a worker from stalling a minute on each new input.
FUZZ = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s
fuzz:
	$(FUZZ) ./fuzz -fuzz '^FuzzClamp$$'
	$(FUZZ) ./fuzz -fuzz '^FuzzSegmentDecode$$'
	$(FUZZ) ./fuzz -fuzz '^FuzzSegmentRoundTrip$$'
	$(FUZZ) ./raft/logstore -fuzz '^FuzzDecodeLog$$'
	$(FUZZ) ./raft/command -fuzz '^FuzzEntryRoundTrip$$'
	$(FUZZ) ./fuzz -fuzz '^FuzzBackupVerify$$'
	$(FUZZ) ./server/bodies -fuzz '^FuzzStreamCycle$$'
	$(FUZZ) ./fuzz -fuzz '^FuzzPush$$'

# The Go benchmarks of bench/, printed as one table in which every rate is
# also a ratio to the limit (raw synced Pebble writes) measured in the same
# run. BENCH selects benchmarks; see bench/README.md.
bench:
	$(GO) test ./bench -run '^$$' -bench '$(or $(BENCH),.)' -benchmem -benchtime $(BENCHTIME) -count 1 -timeout 20m -json \
	  | $(GO) run ./bench/cmd/benchtable

# A long fault-schedule run (cmd/queen/chaos_test.go; `make test` runs one
# short one, TestChaos, and `make test-chaos` TestChaos_Moves and TestChaos_Joins): SEED= replays a seed (0 draws one), DURATION= is how long the faults
# and the load last, NET= is netns (partitions too; needs root), loopback or
# auto; FAULTS= (comma-separated kinds) focuses the schedule; CHAOS_GROUPS=3 in
# the environment runs the nodes with --groups 3 and adds queue moves and
# joins (a fourth node joins; the next join fault has it leave) to the kinds
# drawn (FAULTS=move-orphan, a move whose node is killed, stalls its queue
# for the 5-minute MoveTimeout and is drawn only when named). The seed is
# printed first and with any failure, with the command that replays it.
SEED     ?= 0
DURATION ?= 10m
NET      ?= auto
FAULTS   ?=
chaos:
	$(GO) test ./cmd/queen -run '^TestChaos$$' -count=1 -v -timeout $(or $(CHAOS_TIMEOUT),3h) \
	  -args -chaos.seed=$(SEED) -chaos.duration=$(DURATION) -chaos.net=$(NET) -chaos.faults=$(FAULTS)

# Replays the schedules that found bugs (chaosRegressions in chaos_test.go).
chaos-regressions:
	CHAOS_REGRESSIONS=1 $(GO) test ./cmd/queen -run '^TestChaos_Regressions$$' -count=1 -v -timeout $(or $(CHAOS_TIMEOUT),3h)

# A rolling upgrade under load, checked (bench/upgrade.sh; minutes, not in
# make test): three nodes at OLD, replaced one at a time by the working
# tree's binary; acked == delivered and equal digests, or it fails.
# NGROUPS=3 make upgrade-test UPGRADE_OLD=bef0a33 does it with --groups 3
# --replicas 3 (the old commit must know both).
# UPGRADE_OLD defaults to 7b7a088 (the backup merge), the oldest commit with
# queen step-down, so the leader's hand-over is exercised. Checked OK
# (2026-12-05), each old commit -> the working tree, under load:
#   7b7a088, 16ee193, 39c47dd, 56c462a, and c0a483c (raft-trust merge), the
#   OLDEST the upgrade works from as tested: the first commit with
#   --cluster-secret-file, which the script needs. Commits older than the
#   leadership route (2ec6788) have their leader stopped without step-down.
# Time: 80 s from 7b7a088 with both builds cached (36 430 messages), 154 s
# with a cold build of OLD; 2.5-5 min from the older commits.
UPGRADE_OLD ?= 7b7a088
upgrade-test:
	bench/upgrade.sh $(UPGRADE_OLD)

run: build
	./bin/queen serve --data ./data

# A three-node cluster on loopback: HTTP on 6632, 6642, 6652; Raft on 7001-7003;
# data and logs in ./data-cluster/ (./cluster/ is the Go package). Stop it with make cluster-stop.
PEERS = n1@127.0.0.1:7001,n2@127.0.0.1:7002,n3@127.0.0.1:7003
# The nodes share a cluster secret (data-cluster/secret, made once), so the
# cluster can grow (--join) and shrink (queen leave), which need it.
cluster: build
	@mkdir -p data-cluster
	@[ -s data-cluster/secret ] || (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > data-cluster/secret)
	@for i in 1 2 3; do \
	  port=$$((6622 + 10*i)); \
	  ./bin/queen serve --data data-cluster/n$$i --node-id n$$i --http 127.0.0.1:$$port \
	    --raft 127.0.0.1:700$$i --peers $(PEERS) --cluster-secret-file data-cluster/secret \
	    > data-cluster/n$$i.log 2>&1 & echo $$! > data-cluster/n$$i.pid; \
	  echo "n$$i: http://127.0.0.1:$$port (log data-cluster/n$$i.log)"; \
	done

cluster-stop:
	@for i in 1 2 3; do [ -f data-cluster/n$$i.pid ] && kill $$(cat data-cluster/n$$i.pid) 2>/dev/null; rm -f data-cluster/n$$i.pid; done; true

clean:
	rm -rf bin data data-cluster
