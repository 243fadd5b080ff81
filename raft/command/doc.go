// Package command is the replicated log's format: the commands a leader
// stamps and proposes, and their compact, versioned binary encoding. It is the
// FSM's only input format, so every byte here is part of the on-disk format —
// never change a layout in place; add a new version.
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
// source. Bodies use the same primitives as the engine's records: big-endian
// fixed-width integers, uvarint-length-prefixed strings and byte strings, one
// byte per boolean, 16 raw bytes per id, zigzag varints for signed counts.
//
//	Configure       queue str | nsSet u8 | ns str | taskSet u8 | task str | replace u8 |
//	                nSet uvarint | nSet × (option u8, value varint) | nReset uvarint | nReset × option u8
//	DeleteQueue     queue str
//	Push            n uvarint | n × PushItem
//	PushItem        queue str | partition str | txn str | hasTrace u8 | trace id | producerSub str | payload bytes
//	Pop             queue str | partition str | namespace str | task str | group str | batch varint |
//	                partitions varint | autoAck u8 | subMode u8 | subFrom i64 | leaseSeconds varint
//	Ack             n uvarint | n × AckItem
//	AckItem         txn str | partition id | group str | status u8 | lease id | error str
//	ExtendLease     lease id | seconds varint
//	Transaction     nOps uvarint | nOps × (kind u8 (1 push, 2 ack) | PushItem or AckItem) |
//	                nLeases uvarint | nLeases × lease id
//	Replay          partition id | txn str | group str | hasPayload u8 | payload bytes
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
// PushPrepared carries a push the leader prepared before proposing
// (engine.PreparePush): message ids minted, repeats within the request
// resolved, and each partition's frames already encoded as a segment body
// (zstd), so the log holds compressed payloads and applying only probes for
// duplicates and assembles segments.
//
// Type numbers are listed in command.go; retired numbers stay reserved.
package command
