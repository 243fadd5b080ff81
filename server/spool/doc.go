// Package spool keeps the pushes a node receives during push maintenance
// (docs/semantics.md §12) in files, and gives them back in order once
// maintenance is off. It is apart from package server because it owns an
// on-disk format and a durability rule and knows nothing of HTTP, Raft or
// groups: the edge writes a request's items (Write) and hands Drain a
// function that pushes one file's items where they belong.
//
// # Durability
//
// During push maintenance a push is answered "buffered" only once its spool
// file is durable: written under a .tmp name, fsynced, renamed and the
// directory fsynced (Spool.Write, through the small fileSystem interface).
// Any failure is ErrWrite (the edge's 500 spool_write_failed) and leaves no
// file to replay; a .tmp file found at Open was never answered and is
// discarded. A file is removed, without a sync, once its replay succeeded:
// a removal lost in a crash replays the file again, harmlessly.
//
// # File format
//
// One file per request, named <unix nanoseconds, 20 digits>-<sequence, 6
// digits>.jsonl so that names sort in write order; a name ending in .tmp is
// a file still being written. A file holds one JSON object per line:
//
//	{"queue", "partition"?, "transactionId", "traceId"?, "producerSub"?, "payload", "sealed"?}
//
// payloads as they would have been pushed: sealed for encrypted queues, with
// "sealed":true, so no plaintext of theirs reaches the spool's disk. A line
// without "sealed" (every line an earlier binary wrote) replays as the
// client's bytes, envelope or not. Every item carries a transaction id
// (minted by Write when the client sent none), so a replay interrupted and
// repeated is deduplicated by the queue's dedup window.
package spool
