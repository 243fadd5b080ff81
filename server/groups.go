package server

import (
	"cmp"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/counts"
	"github.com/queenmq/queen/server/wire"
)

// groupQueue is one (group, queue) of the consumer-group list.
type groupQueue struct {
	group, queue     string
	members, withLag int64
	totalLag         int64
	maxTimeLag       float64
	consumed         bool
	sub              *engine.Subscription
}

// listGroups answers GET /api/v1/consumer-groups: one entry per (group,
// queue), queue mode included (docs/semantics.md §14).
func (s *Server) listGroups(ctx *fasthttp.RequestCtx, _ *params) {
	now := time.Now().UnixMicro()
	cursors, err := s.broker.Cursors(now, "")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	subs, err := s.broker.Subscriptions()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	var entries []*groupQueue
	index := map[[2]string]*groupQueue{}
	entry := func(group, queue string) *groupQueue {
		k := [2]string{group, queue}
		if e := index[k]; e != nil {
			return e
		}
		e := &groupQueue{group: group, queue: queue}
		index[k] = e
		entries = append(entries, e)
		return e
	}
	for i := range cursors {
		c := &cursors[i]
		e := entry(c.Group, c.Queue)
		e.members++
		e.totalLag += c.OffsetLag
		if c.OffsetLag > 0 {
			e.withLag++
		}
		e.maxTimeLag = max(e.maxTimeLag, counts.TimeLag(c, now))
		e.consumed = e.consumed || c.TotalConsumed > 0 || c.Committed >= 0
	}
	for i := range subs {
		entry(subs[i].Group, subs[i].Queue).sub = &subs[i]
	}
	slices.SortFunc(entries, func(a, b *groupQueue) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.queue, b.queue))
	})
	w := startReply(ctx)
	w.Array("")
	for _, e := range entries {
		state := "Dead"
		switch {
		case e.maxTimeLag > 300:
			state = "Lagging"
		case e.consumed:
			state = "Stable"
		}
		w.Object("")
		w.Str("name", e.group)
		w.Array("topics")
		w.Str("", e.queue)
		w.EndArray()
		w.Str("queueName", e.queue)
		w.Str("queue", e.queue)
		w.Int("members", e.members)
		w.Int("partitions", e.members)
		w.Int("partitionsWithLag", e.withLag)
		w.Int("totalLag", e.totalLag)
		w.Int("lagMessages", e.totalLag)
		w.Float("maxTimeLag", e.maxTimeLag)
		w.Float("lagSeconds", e.maxTimeLag)
		w.Str("state", state)
		if e.sub != nil {
			w.Str("subscriptionMode", engine.SubModeName(e.sub.Mode))
			w.TimeMillis("subscriptionTimestamp", e.sub.Timestamp)
			w.TimeMillis("subscriptionCreatedAt", e.sub.CreatedAt)
		} else {
			w.Null("subscriptionMode")
			w.Null("subscriptionTimestamp")
			w.Null("subscriptionCreatedAt")
		}
		w.EndObject()
	}
	w.EndArray()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// laggingGroups answers GET /api/v1/consumer-groups/lagging?minLagSeconds=
// (default 3600): partitions whose oldest unconsumed message is older.
func (s *Server) laggingGroups(ctx *fasthttp.RequestCtx, _ *params) {
	lag, err := queryInt(ctx.QueryArgs(), "minLagSeconds", 3600, 0)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	minLag := float64(lag)
	now := time.Now().UnixMicro()
	cursors, err := s.broker.Cursors(now, "")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Array("")
	for i := range cursors {
		c := &cursors[i]
		lag := counts.TimeLag(c, now)
		if c.OffsetLag == 0 || lag <= minLag {
			continue
		}
		w.Object("")
		w.Str("consumer_group", c.Group)
		w.Str("queue_name", c.Queue)
		w.Str("partition_name", c.Partition)
		w.ID("partition_id", c.PartitionID)
		if c.LeaseLive {
			w.ID("worker_id", c.Lease)
		} else {
			w.Null("worker_id")
		}
		w.Int("offset_lag", c.OffsetLag)
		w.Float("time_lag_seconds", lag)
		w.Float("lag_hours", lag/3600)
		w.TimeMillis("oldest_unconsumed_at", c.OldestUnconsumedAt)
		w.TimeMillis("last_consumed_at", c.LastConsumedAt)
		w.EndObject()
	}
	w.EndArray()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// getGroup answers GET /api/v1/consumer-groups/{group}: an object keyed by
// queue name ({} for an unknown group).
func (s *Server) getGroup(ctx *fasthttp.RequestCtx, p *params) {
	now := time.Now().UnixMicro()
	cursors, err := s.broker.Cursors(now, p.get("group"))
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	for i := range cursors {
		c := &cursors[i]
		if i == 0 || cursors[i-1].Queue != c.Queue {
			if i > 0 {
				w.EndArray()
				w.EndObject()
			}
			w.Object(c.Queue)
			w.Array("partitions")
		}
		w.Object("")
		w.Str("partition", c.Partition)
		w.ID("partitionId", c.PartitionID)
		if c.LeaseLive {
			w.ID("workerId", c.Lease)
			w.TimeMillis("leaseExpiresAt", c.LeaseExpiresAt)
		} else {
			w.Null("workerId")
			w.Null("leaseExpiresAt")
		}
		w.TimeMillis("lastConsumedAt", c.LastConsumedAt)
		w.Int("totalConsumed", c.TotalConsumed)
		w.Int("offsetLag", c.OffsetLag)
		w.Float("timeLagSeconds", counts.TimeLag(c, now))
		w.Bool("leaseActive", c.LeaseLive)
		w.Int("retryCount", int64(c.RetryCount))
		w.EndObject()
	}
	if len(cursors) > 0 {
		w.EndArray()
		w.EndObject()
	}
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// deleteGroup answers DELETE /api/v1/consumer-groups/{group} and
// .../{group}/queues/{queue}; deleteMetadata (default true) also drops the
// subscription record.
func (s *Server) deleteGroup(ctx *fasthttp.RequestCtx, p *params) {
	group, queue := p.get("group"), p.get("queue")
	meta := queryBool(ctx.QueryArgs(), "deleteMetadata", true)
	gd, err := raft.Propose[engine.GroupDeleted](s.ctx, s.forwarding(ctx), engine.DeleteGroupCmd{Group: group, Queue: queue, DeleteMetadata: meta})
	deleted, metaDeleted := gd.Cursors, gd.Metadata
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Str("consumerGroup", group)
	if queue != "" {
		w.Str("queueName", queue)
	}
	w.Int("deletedPartitions", int64(deleted))
	w.Bool("metadataDeleted", metaDeleted)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// seek answers POST .../{group}/queues/{queue}/seek and
// .../partitions/{partition}/seek (docs/semantics.md §14): {toEnd:true} or
// {timestamp:ISO}; the per-partition form treats an empty body as toEnd.
func (s *Server) seek(ctx *fasthttp.RequestCtx, p *params) {
	cmd := engine.SeekCmd{Group: p.get("group"), Queue: p.get("queue"), Partition: p.get("partition")}
	hasTimestamp := false
	err := wire.DecodeObject(ctx.PostBody(), true, func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "toEnd":
			cmd.ToEnd, _, err = sc.OptBool("toEnd")
		case "timestamp":
			cmd.Timestamp, hasTimestamp, err = sc.OptTime("timestamp")
		default:
			err = sc.Skip()
		}
		return err
	})
	if err == nil && !cmd.ToEnd && !hasTimestamp {
		if cmd.Partition == "" {
			err = badRequest("Must specify either 'toEnd': true or 'timestamp'")
		}
		cmd.ToEnd = true
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	updated, err := raft.Propose[int](s.ctx, s.forwarding(ctx), cmd)
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Bool("success", updated > 0)
	w.Str("consumerGroup", cmd.Group)
	w.Str("queueName", cmd.Queue)
	if cmd.Partition != "" {
		w.Str("partitionName", cmd.Partition)
		w.Bool("updated", updated > 0)
		if cmd.ToEnd {
			w.Str("cursorMovedTo", "end")
		} else {
			w.TimeMillis("cursorMovedTo", cmd.Timestamp)
		}
	}
	w.Bool("seekToEnd", cmd.ToEnd)
	if cmd.ToEnd {
		w.Null("targetTimestamp")
	} else {
		w.TimeMillis("targetTimestamp", cmd.Timestamp)
	}
	w.Int("partitionsUpdated", int64(updated))
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// updateSubscription answers POST /api/v1/consumer-groups/{group}/subscription.
func (s *Server) updateSubscription(ctx *fasthttp.RequestCtx, p *params) {
	var (
		ts  int64
		has bool
	)
	err := wire.DecodeObject(ctx.PostBody(), true, func(sc *wire.Scanner, key []byte) (err error) {
		if string(key) != "subscriptionTimestamp" {
			return sc.Skip()
		}
		ts, has, err = sc.OptTime("subscriptionTimestamp")
		return err
	})
	if err == nil && !has {
		err = badRequest("Missing subscriptionTimestamp in request body")
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	group := p.get("group")
	updated, err := raft.Propose[int](s.ctx, s.forwarding(ctx), engine.UpdateSubscriptionCmd{Group: group, Timestamp: ts})
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Str("consumerGroup", group)
	w.TimeMillis("newTimestamp", ts)
	w.Int("rowsUpdated", int64(updated))
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}
