// Package keyspace owns every Pebble key and value the engine writes: how keys
// are built and parsed, and how the small records stored under them are
// encoded. Nothing else in the project builds a key by hand.
//
// # Keys
//
// Every key starts with a one-byte family. Integers are big-endian and fixed
// width, so byte order is numeric order; identifiers (queue ids, partition ids,
// lease ids, message ids, DLQ row ids) are 16-byte UUIDs. A string that is not
// the last component of a key is length-prefixed with a big-endian u16 so that
// one name is never a prefix of another inside a range scan.
//
//	family        key layout                                              value
//	0x01 meta     0x01 | name                                             u64 BE (applied index, format version);
//	                                                                      "import/" | queue: Import record
//	0x02 queue    0x02 | queue name                                       Queue record
//	0x03 part     0x03 | partition id (16)                                Partition record
//	0x04 segment  0x04 | partition id (16) | base offset u64              segment bytes (package segment)
//	0x05 txn      0x05 | partition id (16) | transaction id               Txn record
//	0x06 cursor   0x06 | partition id (16) | group                        Cursor record
//	0x07 sub      0x07 | u16 len | queue name | group                     Subscription record
//	0x08 dlq      0x08 | failedAt µs u64 | row id (16)                    DeadLetter record
//	0x09 dlqaddr  0x09 | partition id (16) | u16 len | txn id | row key   empty (index by address)
//	0x0A dlqqueue 0x0A | u16 len | queue | u16 len | group | row key      empty (index by queue, group)
//	0x0B txnexp   0x0B | partition id (16) | createdAt µs u64 | base u64  TxnExpiry list (one per segment)
//	0x0C squery   0x0C | query name                                       StreamQuery record
//	0x0D squeryid 0x0D | query id (16)                                    query name (raw bytes)
//	0x0E sstate   0x0E | query id (16) | partition id (16) | state key    StreamState record
//	0x0F sripe    0x0F | query id (16) | partition id (16) |              empty (ripeness index)
//	                     windowEnd u64 (OrderedFloat) | state key
//	0x10 sshard   0x10 | query id (16) | partition id (16)                StreamShard record (recent cycles)
//	0x11 trace    0x11 | partition id (16) | offset u64 | trace id (16)   Trace record
//	0x12 tracenm  0x12 | u16 len | name | createdAt µs u64 | trace id (16) partition id (16) | offset u64
//	0x13 outbox   0x13 | row id (16)                                      Outbox record
//
// A DLQ "row key" is the 24 bytes after the family byte of its 0x08 key
// (failedAt then row id), so the indexes sort by failure time like the rows
// do, and the newest failure is found by a reverse scan.
//
// A txn-expiry entry lists the transaction ids of one segment under the
// segment's creation time, so the purge of the transaction-id index after its
// window (docs/semantics.md §8.3) reads a partition's oldest entries in order instead
// of scanning the whole index.
//
// Stream families (0x0E-0x10) put the query id first and the source
// partition id second: a query's state is one range (reset and query
// deletion are range deletes), a shard's state another, and a shard's state
// keys sort byte-wise, so a key prefix is a range scan. The ripeness index
// holds one entry per state row whose value has a numeric windowEnd, sorted
// by it, so the rows ripe at a time are a range scan too. Message retention
// never touches these families; nothing in them refers to segments.
//
// Trace records (0x11) are keyed by their message's partition and offset,
// so the traces of the messages retention deletes are the same range as
// their segments; the name index (0x12) sorts each name's records oldest
// first, and its entries go with their records.
//
// Outbox rows (0x13) are the pushes a transaction committed for queues of
// other Raft groups (ARCHITECTURE.md, "Scale-out"), kept until the row is
// delivered to its group and deleted by a second command. The row id is a
// UUIDv7 minted from the committing command's seed, so the rows left by a
// crash are found oldest first by a scan of the family.
//
// Per-partition families (0x04, 0x05, 0x06, 0x09, 0x0B) put the partition id right
// after the family byte, so all of a partition's segments, transaction ids or
// cursors form one contiguous range: retention and queue deletion are range
// deletes (SegmentSpan, TxnSpan). No key holds a number that spans partitions;
// nothing assumes one global order across partitions (DESIGN "Later: more than
// one Raft group").
//
// # Moving a queue
//
// A queue moves between stores (the engine's move.go) as its keys, copied
// verbatim; no family is added for it. The export walks a queue's keys in
// ascending order of their primary key, one family after the other, so the
// last primary key of a chunk is the position the next chunk starts after:
//
//	0x02          the queue record (Queue(name))
//	0x03          its partition records: every 0x03 record whose queue is
//	              the name (partition records are keyed by id, so this scans
//	              the family), in id order
//	0x04 0x05 0x06 the segments, transaction ids and cursors (leases are in
//	              the cursors) of each partition, by partition-id prefix
//	0x07          the subscriptions (Sub(name, "") prefix)
//	0x0A          the dead-letter rows of the name by their (queue, group)
//	              index; each index entry travels with its 0x08 row and its
//	              0x09 address entry (a unit)
//	0x0B 0x11     the txn-expiry entries and traces of each partition; each
//	              trace travels with its 0x12 name entries (a unit)
//
// Stream families (0x0C-0x10) are not walked: a queue a stream reads or
// writes is not moved. Dead-letter rows go by queue name, like ListDLQ:
// the rows of an earlier queue of the same name go with it. While the keys
// arrive, the meta key "import/" | queue holds an Import record (the queue
// id, the move's epoch, the next chunk's number): a store opened with it
// keeps the queue out of its model, and its last chunk deletes it.
//
// # Values
//
// Records start with a version byte (1; dead-letter records 1 or 2) and then
// their fields in declaration order: integers as big-endian fixed width
// (i64/u64: 8 bytes, u32: 4 bytes), ids as 16 raw bytes, strings and byte
// strings as a uvarint length and the bytes, booleans as one byte 0 or 1. A
// record that fails to decode (short, unknown version, trailing bytes)
// returns an error wrapping ErrCorrupt. Times are unix microseconds.
//
//	Queue        ver | id | createdAt i64 | namespace str | task str | n uvarint | n × (option u8, value varint)
//	Partition    ver | queue str | name str | next i64 | start i64 | createdAt i64 | lastWriteAt i64 |
//	             oldestAt i64 | purgeFrom i64
//	TxnExpiry    ver | n uvarint | n × txn bytes
//	Txn          ver | offset i64 | createdAt i64 | message id
//	Cursor       ver | committed i64 | batchEnd i64 | lease id | leaseExpiresAt i64 | leaseAcquiredAt i64 |
//	             retryCount u32 | attemptOffset i64 | attemptCount u32 | totalConsumed i64 |
//	             createdAt i64 | lastConsumedAt i64 | retryAfter i64
//	Subscription ver | mode u8 | timestamp i64 | createdAt i64
//	StreamQuery  ver | id | sourceQueue str | hasSink u8 | sinkQueue str | configHash str | createdAt i64 |
//	             updatedAt i64
//	StreamState  ver | updatedAt i64 | hasWindowEnd u8 | windowEnd f64 bits | value bytes
//	StreamShard  ver | n uvarint | n × (digest (32) | at i64 | result bytes), oldest first
//	Trace        ver | createdAt i64 | txn str | group str | eventType str | workerId str | data bytes |
//	             n uvarint | n × name str
//	Outbox       ver | createdAt i64 | tx id | queue str | partition str | txn str | flags u8 (bit 0 trace,
//	             bit 1 sealed) | trace id | producerSub str | payload bytes
//	DeadLetter   ver | partition id | queue str | partition str | group str | offset i64 | message id |
//	             txn str | hasTrace u8 | trace id | producerSub str | payload bytes | error str |
//	             retryCount u32 | enqueuedAt i64 | deliveries u32 | [ver 2: flags u8]
//	Import       ver | queue id | epoch u64 | next chunk u32
//
// Queue options are stored as (option number, value) pairs so an option can be
// added without a format change; option numbers are part of the format and
// are never reused (see the engine's option table).
//
// Dead-letter records come in two versions. Version 2 is version 1 followed
// by a flags byte: bit 0 (sealed) says the payload is an encryption envelope
// the broker sealed, copied from the frame's sealed bit (engine/segment) when
// the row is filed; only such payloads are decrypted on read. The other bits
// are zero and at least one is set: a row without flags is written as
// version 1, the very bytes earlier binaries wrote, so a binary that predates
// version 2 still reads every row of an unencrypted queue, and fails loudly
// ("unknown version 2", ErrCorrupt) on a sealed row rather than misreading
// it. Rows written before version 2 existed read as not sealed: their
// payloads are returned exactly as stored, envelopes included. Nothing is
// rewritten; rows are immutable.
//
// # Versioning
//
// The meta key "version" holds the store format version (FormatVersion). The
// engine refuses to open a store with a newer version; a version bump comes with
// an upgrade step in the engine's Open and an upgrade fixture in its tests.
//
// Record versions are finer than the store format version: a record type may
// gain a version that this binary reads beside the older ones, as the
// dead-letter record did. The store format version stays 1 for version-2
// dead-letter rows and sealed segment frames: this binary reads both from any
// store with no upgrade step, and a binary that predates them fails on the
// record it cannot read instead of at open. Raising FormatVersion would make
// such a binary refuse every store, those that hold no sealed payload too.
// Golden records are kept in testdata as format fixtures, and
// raft/testdata/store-v1 is a whole data directory of format 1 (engine and
// Raft log, made by `queen serve`) that the tests of every later binary open
// (TestOpen_StoreV1Fixture); a newer format gets a fixture of its own beside
// it. A store of a newer format is refused at open with ErrNewerFormat,
// naming both versions.
package keyspace
