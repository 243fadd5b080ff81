// Command queen runs the broker and its helpers.
//
//	queen serve [flags]   run a node (single node by default)
//	queen check --data DIR   walk a stopped node's store and report inconsistencies
//	queen leave --url URL --node-id ID   remove a node from its cluster
//	queen step-down --url URL   hand over the leadership of the groups a node leads
//	queen recover --data DIR [--peers ...]   rewrite a stopped node's membership after a lost quorum
//	queen status | queues | dlq ...   what an operator looks at (ops.go)
//
// Run `queen serve -h` for the flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=..."; else
// versionString reads the module version and VCS revision the Go tool
// stamped into the binary.
var version = "dev"

func init() { version = versionString(version, debug.ReadBuildInfo) }

// versionString is the version an operator reads: the -ldflags one when
// set, else the module version (a tagged module build), with the VCS
// revision, its time and "+dirty" for uncommitted changes when the build
// recorded them (go build in a checkout; go run records none).
func versionString(set string, info func() (*debug.BuildInfo, bool)) string {
	if set != "dev" && set != "" {
		return set
	}
	bi, ok := info()
	if !ok {
		return "dev"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	var rev, at string
	dirty := false
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.time":
			at = st.Value
		case "vcs.modified":
			dirty = st.Value == "true"
		}
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if strings.Contains(v, rev) {
		return v // a pseudo-version names the revision and its time already
	}
	if dirty {
		rev += "+dirty"
	}
	if at != "" {
		return fmt.Sprintf("%s (%s, %s)", v, rev, at)
	}
	return fmt.Sprintf("%s (%s)", v, rev)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	case "leave":
		err = leave(os.Args[2:])
	case "step-down":
		err = stepDownCmd(os.Args[2:], os.Stdout)
	case "recover":
		err = recoverCmd(os.Args[2:])
	case "backup":
		err = backupCmd(os.Args[2:], os.Stdout)
	case "restore":
		err = restoreCmd(os.Args[2:], os.Stdout)
	case "bench":
		err = benchCmd(os.Args[2:])
	case "status":
		err = statusCmd(os.Args[2:], os.Stdout)
	case "queues":
		err = queuesCmd(os.Args[2:], os.Stdout)
	case "dlq":
		err = dlqCmd(os.Args[2:], os.Stdout)
	case "move":
		err = moveCmd(os.Args[2:], os.Stdout)
	case "version", "--version", "-version", "-v":
		fmt.Println("queen", version)
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "queen: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		// -h asked for the help the flag package printed: not a failure.
	case err != nil:
		fmt.Fprintf(os.Stderr, "queen %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: queen <command> [flags]

commands:
  serve     run a broker node (single node by default, port 6632)
  check     verify a stopped node's store (--data DIR)
  leave     remove a node from its cluster (--url http://any-node:6632 --node-id ID [--force])
  step-down hand over the leadership of every Raft group the node at --url leads
            (--url http://node:6632)
  recover   rewrite a stopped node's membership after its cluster lost the quorum
            (--data DIR [--peers id@host:port,...]; default DIR/peers.json)
  backup    save a running cluster's state to a file (--url URL --out FILE [--token T]),
            or check one (--verify FILE)
  restore   write a new data directory from a backup file, offline
            (--in FILE --data DIR [--node-id ID] [--raft host:port])
  bench     drive running nodes with load and report throughput and latency (queen bench -h)
  status    every node's role, leader, term, applied index, lag, disk free and version; each Raft
            group's leader, members and queues
            (--url http://a:6632,http://b:6632 [--json])
  queues    the queues with their partitions and message counts (--url, --json)
  dlq       list | replay | delete dead letters, with the API's filters (queen dlq list -h)
  move      move a queue to another Raft group of a --groups cluster, live
            (QUEUE --group G [--url URL])
  version   print the version and the VCS revision it was built from (also --version, -v)
`)
}
