// Package envelope seals message payloads into Queen's encryption-at-rest
// envelope and opens them again: AES-256-GCM under the node's
// QUEEN_ENCRYPTION_KEY, stored as a JSON object {"encrypted","iv","authTag"}
// that Queen's C++ and Rust brokers read and write too. It is apart from
// package server because it is a byte format with a pinned test vector and
// no HTTP in it: ParseKey reads the key, a Cipher seals (Seal), opens (Open)
// and decides what a read returns (Reveal). Which queues are sealed, and the
// sealed mark on each item, are the edge's decisions (server/crypt.go).
//
// # Encryption at rest
//
// docs/semantics.md §11. With Options.EncryptionKey (QUEEN_ENCRYPTION_KEY:
// 64 hex characters, a 32-byte AES-256 key), the payload of every item
// pushed to a queue whose encryptionEnabled is set is replaced, at the edge
// (server/crypt.go) and before the command is proposed, by Queen's envelope. The Raft
// log, the engine's segments, snapshots and dead-letter snapshots therefore
// only ever hold the envelope, and applying a command stays deterministic:
// the random IV is drawn at the edge, once, not by each replica's state machine.
// Only the payload is sealed; transaction id, message id, partition, trace
// id and producerSub are not.
//
// The envelope is the JSON text
//
//	{"encrypted":"<base64 ciphertext>","iv":"<base64, 16 bytes>","authTag":"<base64, 16 bytes>"}
//
// in that member order, without whitespace, base64 being the standard
// alphabet with padding. Its construction:
//
//	iv         16 bytes from crypto/rand, all stored
//	nonce      iv[0:12]   (the last 4 iv bytes are unused)
//	ciphertext, authTag = AES-256-GCM(key, nonce, plaintext, no additional data), 16-byte tag
//	plaintext  the payload's JSON text exactly as the client sent it
//
// Only the first 12 IV bytes are the nonce because Queen's C++ broker
// passed a 16-byte IV to OpenSSL without setting the GCM IV length, so
// OpenSSL used its default, 12; the Rust broker reproduces that, and so do
// we: data either of them wrote opens here, and ours opens there. The
// envelope's sizes are stored format — never change them. A test vector
// (envelope_internal_test.go) pins the construction and was checked against
// OpenSSL independently.
//
// Which payloads are sealed: the items of POST /push, the push operations
// of POST /transaction, and a replay's corrected payload (docs/decisions.md B4) — each when a
// key is configured and the target queue exists with encryptionEnabled, as
// this node's applied state says at push time (a queue the push creates is
// not encrypted). Changing the flag later rewrites nothing. Without a key
// the push path looks nothing up; with one it reads the queue's flag once
// per run of items naming the same queue, through the Broker's optional
// QueueConfig when it has one (else the whole QueueInfo).
//
// Each payload sealed here is marked sealed (engine.PushItem.Sealed,
// ReplayCmd.Sealed), and the mark travels with it: in the command (the
// segment frames of PushPrepared, the push item and replay encodings of
// raft/command), in the stored frame (engine/segment, flag bit 2) and in a
// dead-letter row (engine/keyspace, record version 2). The edge decides it
// before proposing, so applying reads it from the command, never from the
// key or the queue's flag. A replay without a corrected payload re-pushes
// the stored snapshot with its own mark, so an envelope stays one envelope
// and is never sealed twice; a corrected payload is sealed, and marked, if
// the queue is encrypted now, else stored as sent.
//
// Reads open only what the broker sealed: pop's data, message detail's
// payload/data and the DLQ's data are opened when the message's (or the
// row's) sealed mark is set, the envelope's shape is checked (one object
// with exactly those three string members, in any order and spacing, iv and
// authTag decoding to 16 bytes) and it opens under the key to one JSON
// value; message detail and DLQ rows then say isEncrypted:true. Everything
// else is written exactly as stored, with isEncrypted:false: any payload
// the broker did not seal, whatever its shape, and a sealed one that does
// not open (another key, no key, tampering), which is counted in
// queen_payload_decrypt_failures_total. The envelope is never replaced by
// an invented value. So an envelope a client pushes, one it captured from a
// backup say, comes back exactly as sent from a plain queue; into an
// encrypted queue it is sealed like any payload and comes back, opened
// once, as the client's envelope. This departs from docs/semantics.md §11, which
// opens by the envelope's shape: that made any queue a decryption oracle
// for whoever could push and pop. Queen keeps an is_encrypted flag per
// message; the sealed mark is the same idea.
//
// Messages and dead letters stored before the mark existed carry none, and
// are returned as stored: an encrypted queue's envelope from then is read
// back as the envelope, isEncrypted:false. That is acceptable: nothing
// leaks, only the convenience of reading those old messages decrypted is
// lost (the key and the construction above open them offline), and opening
// unmarked payloads by their shape would keep the oracle open for every
// message. Drain encrypted queues before upgrading if that matters.
//
// The push-maintenance spool (package spool) holds items as they would have been
// pushed, sealed ones with their mark, so no encrypted queue's plaintext
// reaches its disk. The leader replays them as stored, marks included. A
// follower cannot hand a mark over: the leader would have to believe a
// request that says its payload is sealed, which any client could send. It
// opens its sealed items and relays the plaintext as an ordinary push (as a
// forwarded push carries it), and the leader seals them by the queue's flag
// then. A spool line written before the mark existed replays as the
// client's bytes, and the X-Queen-Sealed header such relays carried is
// ignored: either way an envelope from then reads back as the envelope.
//
// A missing key disables encryption: queues with encryptionEnabled then
// store plaintext, configuring the flag logs a warning, and a push never
// fails because of encryption. A malformed key (anything but 64 hex
// characters once surrounding whitespace is trimmed) is refused instead:
// Options.Validate and so New fail with an error naming
// QUEEN_ENCRYPTION_KEY and the expected format, never quoting the key, and
// `queen serve` exits before it opens the data directory or listens. This
// departs from docs/semantics.md §11, where a malformed key disables encryption
// like a missing one: an operator who set a key asked for encryption, and a
// typo must not turn that into plaintext on disk while configure still
// answers encryptionEnabled:true.
//
// In a cluster every node needs the same key: a push is sealed by the
// leader's edge (a follower forwards the request as it came), but reads are
// served by whichever node answers them. Every node must also run a binary
// that knows the sealed mark before anything is pushed to an encrypted
// queue: a node on an older one stops, or fails to read, on sealed data
// (loudly, never misreading it; the formats' doc.go say where).
package envelope
