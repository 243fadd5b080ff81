// Command queen runs the broker and its helpers.
//
//	queen serve [flags]   run a node (single node by default)
//	queen check --data DIR   walk a stopped node's store and report inconsistencies
//	queen leave --url URL --node-id ID   remove a node from its cluster
//	queen recover --data DIR [--peers ...]   rewrite a stopped node's membership after a lost quorum
//
// Run `queen serve -h` for the flags.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

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
	case "recover":
		err = recoverCmd(os.Args[2:])
	case "bench":
		err = benchCmd(os.Args[2:])
	case "version":
		fmt.Println(version)
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "queen: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
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
  recover   rewrite a stopped node's membership after its cluster lost the quorum
            (--data DIR [--peers id@host:port,...]; default DIR/peers.json)
  bench     drive running nodes with load and report throughput and latency (queen bench -h)
  version   print the version
`)
}
