// Package counts is the message-count arithmetic of the status, resource
// and overview routes: what a partition, a queue or a sum of them holds
// (total, pending, processing, completed, dead-lettered), read from the
// broker's engine.QueueInfo and engine.PartitionInfo, the dead-letter
// breakdown by queue, partition and error, and the JSON objects that show
// them.
//
// It is apart from package server because none of it is a route's logic:
// it is the same few sums whichever of the five routes that show counts
// needs them (/api/v1/status, its queues and queue views, the resource
// views and the overview), and the one definition of what pending,
// processing and completed mean when several consumer groups read a
// partition is then read in one place. It imports no package of the edge
// but server/wire, and reads the dead-letter queue through the one broker
// method it needs (DLQLister).
//
// # What the counts mean
//
// Counts are relative to the slowest consumer group on each partition (the
// one with the most left to consume): pending is what it has not received,
// processing what it holds under a live lease, completed what it has
// consumed. A partition no group has touched counts everything as pending.
// failed is always 0 (Queen's field; a failed message is retried or
// dead-lettered here), and deadLetter comes from the dead-letter indexes,
// not from the partitions.
package counts
