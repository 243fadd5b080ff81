package command

import "reflect"

// Command versions: the cluster's feature version.
//
// The entry version (doc.go, "Versions") says how an entry is laid out;
// the command version says which commands a binary can apply. Each row of
// the command table names the command version that brought its type
// (version 1: every type up to TypeLookupLease; version 2: the outbox's,
// TypeOutboxTx and TypeOutboxDelete, and a queue move's, TypeImportQueue,
// TypeDropQueue, TypeFreezeQueue, TypeBeginMove, TypeEndMove and
// TypeAbortMove; version 3: groups on R of N nodes, TypeReplicas,
// TypeGroupLayout, TypeReplicaStep and TypeNodeLeaving, and the load
// signal, TypeGroupLoad), and a command that grows
// its row's version the second way (a new value in a flags or enum byte,
// or a field written after the others only when set) says so itself by
// implementing Versioned: version 4 is EndMove's and AbortMove's attempt
// (StartedAt, dirmove.go). MaxVersion is the highest command
// version this binary applies: a new type or a new value raises it by one
// and marks itself with the new number.
//
// A node advertises MaxVersion (and its binary version); the cluster runs
// at the lowest version its servers advertise, and no node proposes a
// command above it (package raft, version.go). So while one node still
// runs an older binary, a newer one does not write what the older one
// would stop at: the cluster-version idea of etcd and CockroachDB. A node
// that advertises nothing (a binary from before command versions) is at
// version 1.
//
// Part of the cluster's contract — a version number, once given to a
// command, is never changed or reused.
const MaxVersion uint8 = 4

// Versioned is a command whose version depends on its value: one that
// grew its row's version by a new value of a flags or enum byte, or by a
// field written only when set, returns the version of that value when it
// carries it, and the row's version otherwise.
type Versioned interface {
	CommandVersion() uint8
}

// Version is the command version s needs: its row's, or what s says of
// itself (Versioned). A raw command (Stamped.Raw, a prepared push) is not
// decoded: its row's. 0 for a type the table does not list.
func Version(s Stamped) uint8 {
	var k *codec
	if s.Raw != nil {
		if len(s.Raw) == 0 {
			return 0
		}
		k = byType[s.Raw[0]]
	} else {
		k = byGoType[reflect.TypeOf(s.Cmd)]
	}
	if k == nil {
		return 0
	}
	v := k.since
	if c, ok := s.Cmd.(Versioned); ok {
		v = max(v, c.CommandVersion())
	}
	return v
}

// TypeVersion is the command version that brought type t; 0 for a type
// the table does not list.
func TypeVersion(t Type) uint8 {
	if k := byType[t]; k != nil {
		return k.since
	}
	return 0
}
