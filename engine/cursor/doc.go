// Package cursor decides what one ack call does to a consumer group's cursor
// in one partition: the ack clamp of docs/semantics.md §6.3. It is pure value
// arithmetic with no I/O and no allocation, so that the engine, the property
// test and the fuzzer all drive the same function.
//
// # Inputs
//
// The caller groups an ack request by (partition, consumer group, lease),
// resolves every transaction id to its [Offset] (an id that cannot be resolved
// is rejected by the caller and never reaches the clamp), normalises every wire
// status with [ParseStatus], validates the lease, and then calls [Clamp] once
// per group with:
//
//   - a [State] read from the cursor row: the committed offset, the span an
//     item may name (SpanEnd), the end of the leased batch (BatchEnd) and the
//     retry budget counter (RetryCount, batch_retry_count);
//   - the queue's [Policy]: the retry limit and whether dead-lettering is on;
//   - the items in request order, unsorted, possibly repeating an offset.
//
// Lease expiry is not an input: the caller never calls Clamp when a lease
// expires, which is how expiry never charges the budget (docs/semantics.md §5).
//
// # Decision procedure
//
// An item is in span when Committed < Offset <= SpanEnd. Only in-span items
// take part in the decision; the others are answered on their own (see
// Outcomes below).
//
// 1. Head signal. Among the in-span items whose status is not Completed, the
// lowest offset is the poison offset. Several items may name it; the winning
// status there is DeadLetter, then Failed, then Retry, and among items with the
// winning status the first in request order is the one reported
// (Decision.PoisonIndex). No such item means there is no signal.
//
// 2. Prefix. The new committed prefix is the highest in-span Completed offset
// strictly below the poison offset, or the highest in-span Completed offset at
// all when there is no signal. Acking offset k completed thereby completes
// every un-acked offset of the span below k (implicit ack of silent gaps). If
// no Completed offset qualifies, the prefix is the old committed offset. A
// Completed item above the poison offset is never applied: a failure is never
// skipped by a later success in the same call.
//
// 3. Action, chosen by the head signal alone:
//
//   - No signal, prefix unchanged: [Unchanged]. Nothing moves, the lease is
//     kept and the counter untouched, even if Committed already reaches
//     BatchEnd: a call that moves nothing releases nothing.
//   - No signal, prefix moved but below BatchEnd: [Advance]. Commit the prefix
//     and keep the lease so the rest of the batch can still be acked; the
//     counter is not reset by a partial commit.
//   - No signal, prefix at or past BatchEnd: [Complete]. Commit, release the
//     lease, reset the counter to 0.
//   - Retry: [Release]. Commit the prefix, release the lease, counter
//     unchanged.
//   - Failed with RetryCount < RetryLimit: [Release], and charge the budget:
//     the counter goes up by exactly 1, however many failed items the call
//     carries.
//   - Failed with the budget exhausted: [ActionDeadLetter] if Policy.DeadLetter,
//     else [Drop].
//   - DeadLetter (an explicit "dlq" ack): [ActionDeadLetter] at once, whatever
//     the budget and even when Policy.DeadLetter is false: asking for the
//     dead-letter queue by name always files the message (the seed page's
//     "skips the budget entirely and dead-letters on the first try"; the
//     policy switch only governs what an exhausted budget does).
//
// The two terminal actions commit the prefix, then move the committed offset
// onto the poison offset (Decision.Committed = Decision.Poison) so that
// consumption continues after it, reset the counter to 0 and release the lease.
// For ActionDeadLetter the caller files the poison frame with the counter as it
// was before the call (State.RetryCount), which is the DLQ row's retryCount.
//
// The signal decides the counter even when the prefix also reaches BatchEnd
// (possible only for a lease-less ack whose span runs past the leased batch):
// a Failed signal then charges the counter, it does not reset it.
//
// # Outcomes
//
// Clamp answers every item in request order:
//
//   - [Noop]: Completed at or below the old committed offset; success:true,
//     noop:true.
//   - [Stale]: any other status at or below the old committed offset;
//     success:false, "already committed".
//   - [OutOfSpan]: above SpanEnd; success:false, nothing applied.
//   - [Superseded]: in span but above the poison offset, whatever its status;
//     not applied, it redelivers, answered success:true as Queen does.
//   - [Applied]: in span and not above the poison offset (or any in-span item
//     when there is no signal). This includes every item at the poison offset,
//     the winner and the items it outranked; the dlq:true and dropped:true flags
//     of docs/decisions.md C7 belong to the winner alone (Decision.PoisonIndex).
//
// # Statuses
//
// [ParseStatus] follows docs/decisions.md C8 and is case-sensitive: "completed",
// "success", "acked", "ok" and "" are Completed; "failed", "retry" and "dlq"
// are Failed, Retry and DeadLetter; everything else, including "FAILED",
// "Completed" and " ok", is Failed. Treating an unrecognised spelling as a
// failure can only cause a redelivery, never a silent commit. An Item whose
// Status is not one of the four constants is likewise treated as Failed.
package cursor
