// Package command is the replicated log's format: the commands a leader
// stamps and proposes, and their compact, versioned binary encoding. It is the
// FSM's only input format, so every byte here is part of the on-disk format —
// never change a layout in place; grow it as "Versions" below allows.
//
// # Entry
//
// One Raft log entry carries a group of commands (group commit):
//
//	+-------+---------+-----------------+--------------------------------------+
//	| magic | version | count (uvarint) | count × (len uvarint | command bytes) |
//	| 0x51  | u8 = 1  |                 |                                      |
//	+-------+---------+-----------------+--------------------------------------+
//
// An unknown magic or version fails loudly (ErrCorrupt wrapping, or
// ErrVersion): a node must never apply a command it does not understand.
//
// # Command
//
//	+----------+-----------------+-----------+------------------+
//	| type u8  | time i64 BE (µs)| seed (16) | body (by type)   |
//	+----------+-----------------+-----------+------------------+
//
// The time and seed are the leader's stamp (engine.Stamp): every replica
// applies the command with them, so no replica reads a clock or a random
// source. The time sits at a fixed offset (byte 1) so that a leader stamps
// a command another node prepared and encoded (a push, with the seed that
// minted its ids) by writing its time over it, without decoding and
// encoding it again (Stamped.Raw). Bodies use the same primitives as the engine's records: big-endian
// fixed-width integers, uvarint-length-prefixed strings and byte strings, one
// byte per boolean, 16 raw bytes per id, zigzag varints for signed counts.
//
//	Configure       queue str | nsSet u8 | ns str | taskSet u8 | task str | replace u8 |
//	                nSet uvarint | nSet × (option u8, value varint) | nReset uvarint | nReset × option u8
//	DeleteQueue     queue str
//	Push            n uvarint | n × PushItem
//	PushItem        queue str | partition str | txn str | flags u8 (1 trace, 2 sealed) | trace id |
//	                producerSub str | payload bytes
//	Pop             queue str | partition str | namespace str | task str | group str | batch varint |
//	                partitions varint | autoAck u8 | subMode u8 | subFrom i64 | leaseSeconds varint
//	Ack             n uvarint | n × AckItem
//	AckItem         txn str | partition id | group str | status u8 | lease id | error str
//	ExtendLease     lease id | seconds varint
//	Transaction     nOps uvarint | nOps × (kind u8 (1 push, 2 ack) | PushItem or AckItem) |
//	                nLeases uvarint | nLeases × lease id
//	Replay          partition id | txn str | group str | payload u8 (0 none: replay the snapshot,
//	                1 corrected, 2 corrected and sealed; with 1 or 2, bit 2 (4) the producer follows) |
//	                payload bytes | [producerSub str]
//	DeleteDLQ       partition id | txn str | group str
//	MoveToDLQ       partition id | txn str | group str | error str
//	Seek            group str | queue str | partition str | toEnd u8 | timestamp i64
//	DeleteGroup     group str | queue str | deleteMetadata u8
//	UpdateSub       group str | timestamp i64
//	Announce        node id str | http address str
//	Sweep           (no body: retention, eviction and index purge as of the stamp's time)
//	Maintenance     pop u8 (0 push switch, 1 pop switch) | enabled u8
//	PushPrepared    n uvarint | n × (txn str | message id | flags u8 (1 minted txn, 2 duplicate,
//	                4 rejected) | [duplicateOf uvarint] | [reject str]) | nGroups uvarint |
//	                nGroups × (queue str | partition str | k uvarint | k × item uvarint |
//	                codec u8 | rawLen u32 | body bytes)
//
//	StreamRegister  name str | sourceQueue str | hasSink u8 | sinkQueue str | configHash str | reset u8
//	StreamDelete    name str
//	StreamCycle     query id | partition id | group str | nOps uvarint | nOps × (kind u8 (1 upsert,
//	                2 delete) | key str | [upsert: hasWindowEnd u8 | windowEnd f64 bits u64 | value bytes]) |
//	                hasAck u8 | [txn str | lease id | status u8 | count varint | error str] |
//	                keepLease u8 | digest (32) | hasPush u8 | [the PushPrepared body]
//	Trace           partition id | txn str | group str | eventType str | workerId str | data bytes |
//	                n uvarint | n × name str
//	Groups          count uvarint
//	PlaceQueue      queue str | group uvarint (0: the directory chooses)
//	LookupQueue     queue str (answered from the leader's state, never in a log: encoded only to be relayed)
//	LookupPartition partition id (16) (as LookupQueue)
//	LookupLease     lease id (16) (as LookupQueue)
//	OutboxTx        the Transaction body | nAway uvarint | nAway × PushItem
//	OutboxDelete    n uvarint | n × row id (16)
//	ImportQueue     group uvarint | queue str | queue id | epoch uvarint | seq uvarint | last u8 |
//	                n uvarint | n × (key bytes | value bytes)
//	DropQueue       group uvarint | queue str | queue id
//	FreezeQueue     group uvarint | queue str | epoch uvarint | thaw u8
//	BeginMove       queue str | to uvarint
//	EndMove         queue str | to uvarint | epoch uvarint [| startedAt uvarint, command version 4]
//	AbortMove       queue str | epoch uvarint [| startedAt uvarint, command version 4]
//	Replicas        count uvarint
//	GroupLayout     group uvarint | term uvarint | leader str | n uvarint | n × voter str
//	ReplicaStep     group uvarint | add str | remove str | phase u8 (0 begin, 1 ready, 2 done)
//	GroupLoad       group uvarint | term uvarint | msgs uvarint | msgsPerSec f64 bits u64 |
//	                bytesPerSec f64 bits u64 | n uvarint | n × (queue str | msgs uvarint |
//	                msgsPerSec f64 bits u64 | bytesPerSec f64 bits u64 | pinned u8)
//	NodeLeaving     id str | leaving u8
//
// Groups, PlaceQueue and LookupQueue are the directory's (group 0 of a cluster.Host):
// directory.go.
//
// ImportQueue and DropQueue move a queue between groups (engine/move.go,
// move.go): an import chunk carries keys and values of the source group's
// store verbatim (their layouts are engine/keyspace's), and both name the
// group they are for, which routes them; the engine does not read it.
// FreezeQueue (engine/freeze.go) is routed the same way. BeginMove, EndMove
// and AbortMove are the directory's record of a move (dirmove.go); Replicas
// and GroupLayout its record of where the groups live (layout.go, command
// version 3: testdata/entry-v1-layout.golden); GroupLoad its load signal
// (load.go, command version 3: testdata/entry-v1-load.golden).
//
// PushPrepared carries a push the leader prepared before proposing
// (engine.PushCmd.Prepare): message ids minted, repeats within the request
// resolved, and each partition's frames already encoded as a segment body
// (zstd), so the log holds compressed payloads and applying only probes for
// duplicates and assembles segments.
//
// Push (type 3) is no longer proposed, pushes go as PushPrepared, but it is
// still decoded: logs written before PushPrepared hold it.
//
// Type numbers are listed in command.go; retired numbers stay reserved.
// Each type is a row of the table in command.go and has a command in a
// golden entry (testdata), which a test requires. The stream types (18-20)
// traces (21), the directory's (22-24) and the lookups (25-26) came later as new type numbers,
// the first way of growing version 1 below: testdata/entry-v1-streams.golden,
// entry-v1-traces.golden, entry-v1-directory.golden and entry-v1-lookup.golden
// hold them. The outbox's (27-28, engine.OutboxTxCmd and OutboxDeleteCmd:
// a transaction across Raft groups) are command version 2 (version.go), so
// that no node proposes them while an older binary could meet them;
// testdata/entry-v1-outbox.golden holds them.
//
// # Results
//
// A command one node relays to its group's leader comes back as its
// result, encoded by the result codec in the command's row of the table
// (results.go, which documents those layouts). A row's codec is what lets
// the command be relayed at all; notRelayed rows are answered only by the
// node that proposed them. Results cross nodes and are never stored. A row
// may start relaying without a new version: a leader whose table does not
// relay the command refuses it before proposing it (raft.ErrNotPreparable),
// and the node that sent it relays the client's request whole instead.
//
// # Versions
//
// The entry version is 1, and a layout is never changed in place:
// testdata/entry-v1.golden holds one command of every type as version 1
// first wrote it, and must keep encoding and decoding to the same bytes.
// Version 1 may grow in two ways only, each of which an older binary meets
// as a command it cannot decode (ErrCorrupt), so the FSM stops that node
// instead of applying something it misunderstands: a new type number, or a
// new value in a flags or enum byte whose decoder rejects unknown values
// (a strict boolean is such a byte). A command that does not use the new
// value encodes exactly as before. Anything else (a field added, moved or
// widened) takes a new entry version, which stops an older binary at the
// first entry of any kind.
//
// The sealed bit (package server, "Encryption at rest": the broker decrypts
// only payloads it sealed) grew version 1 the second way; its fixtures are
// in testdata/entry-v1-sealed.golden:
//
//   - PushItem's fourth byte was hasTrace, read as a strict boolean; it is
//     now flags, bit 0 the trace (so 0 and 1 mean what they meant) and bit 1
//     sealed. Push and Transaction carry it.
//   - Replay's hasPayload byte, also a strict boolean, is now the payload
//     kind: 0 and 1 as before, 2 a corrected payload the edge sealed.
//   - PushPrepared is unchanged: its bodies are segment frames, whose own
//     flags carry the bit (engine/segment, flag bit 2, "Flag bits").
//
// The edge decides the bit before proposing; applying reads it from the
// command (or, replaying a snapshot, from the dead-letter row), never from
// a clock or the key. During a rolling upgrade a node on an older binary
// stops at the first Transaction or Replay that carries a sealed payload
// and resumes from there once upgraded; it applies PushPrepared entries
// with sealed frames, storing the bytes every replica stores, but cannot
// read those frames until it is upgraded. A new entry version would have
// stopped it at the first entry after the leader's upgrade, whether or not
// anything was sealed; hence the growth in place of a version 2.
//
// The replay's producer grew version 1 the same way (fixtures in
// testdata/entry-v1-producer.golden): a corrected payload is stamped with
// the replaying caller's producerSub, not the dead letter's, so nobody
// publishes words under another's name (engine.ReplayCmd.Restamp). Bit 2
// of Replay's payload kind says so, and the producerSub string follows the
// payload; kinds 1 and 2 without it, as older logs hold them, keep the
// snapshot's producer when applied, as they did. An older binary stops at
// the first corrected replay, as at a sealed one.
package command
