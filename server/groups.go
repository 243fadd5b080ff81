package server

import (
	"cmp"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// timeLag is the age in seconds of the oldest message a cursor has not
// consumed (0 when it is at the head).
func timeLag(c *engine.CursorInfo, now int64) float64 {
	if c.OffsetLag == 0 || c.OldestUnconsumedAt == 0 {
		return 0
	}
	return float64(max(now-c.OldestUnconsumedAt, 0)) / 1e6
}

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
		e.maxTimeLag = max(e.maxTimeLag, timeLag(c, now))
		e.consumed = e.consumed || c.TotalConsumed > 0 || c.Committed >= 0
	}
	for i := range subs {
		entry(subs[i].Group, subs[i].Queue).sub = &subs[i]
	}
	slices.SortFunc(entries, func(a, b *groupQueue) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.queue, b.queue))
	})
	w := startBody(ctx)
	w.array("")
	for _, e := range entries {
		state := "Dead"
		switch {
		case e.maxTimeLag > 300:
			state = "Lagging"
		case e.consumed:
			state = "Stable"
		}
		w.object("")
		w.str("name", e.group)
		w.array("topics")
		w.str("", e.queue)
		w.endArray()
		w.str("queueName", e.queue)
		w.str("queue", e.queue)
		w.int("members", e.members)
		w.int("partitions", e.members)
		w.int("partitionsWithLag", e.withLag)
		w.int("totalLag", e.totalLag)
		w.int("lagMessages", e.totalLag)
		w.float("maxTimeLag", e.maxTimeLag)
		w.float("lagSeconds", e.maxTimeLag)
		w.str("state", state)
		if e.sub != nil {
			w.str("subscriptionMode", engine.SubModeName(e.sub.Mode))
			w.timeMillis("subscriptionTimestamp", e.sub.Timestamp)
			w.timeMillis("subscriptionCreatedAt", e.sub.CreatedAt)
		} else {
			w.null("subscriptionMode")
			w.null("subscriptionTimestamp")
			w.null("subscriptionCreatedAt")
		}
		w.endObject()
	}
	w.endArray()
	send(ctx, fasthttp.StatusOK, w)
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
	w := startBody(ctx)
	w.array("")
	for i := range cursors {
		c := &cursors[i]
		lag := timeLag(c, now)
		if c.OffsetLag == 0 || lag <= minLag {
			continue
		}
		w.object("")
		w.str("consumer_group", c.Group)
		w.str("queue_name", c.Queue)
		w.str("partition_name", c.Partition)
		w.id("partition_id", c.PartitionID)
		if c.LeaseLive {
			w.id("worker_id", c.Lease)
		} else {
			w.null("worker_id")
		}
		w.int("offset_lag", c.OffsetLag)
		w.float("time_lag_seconds", lag)
		w.float("lag_hours", lag/3600)
		w.timeMillis("oldest_unconsumed_at", c.OldestUnconsumedAt)
		w.timeMillis("last_consumed_at", c.LastConsumedAt)
		w.endObject()
	}
	w.endArray()
	send(ctx, fasthttp.StatusOK, w)
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
	w := startBody(ctx)
	w.object("")
	for i := range cursors {
		c := &cursors[i]
		if i == 0 || cursors[i-1].Queue != c.Queue {
			if i > 0 {
				w.endArray()
				w.endObject()
			}
			w.object(c.Queue)
			w.array("partitions")
		}
		w.object("")
		w.str("partition", c.Partition)
		w.id("partitionId", c.PartitionID)
		if c.LeaseLive {
			w.id("workerId", c.Lease)
			w.timeMillis("leaseExpiresAt", c.LeaseExpiresAt)
		} else {
			w.null("workerId")
			w.null("leaseExpiresAt")
		}
		w.timeMillis("lastConsumedAt", c.LastConsumedAt)
		w.int("totalConsumed", c.TotalConsumed)
		w.int("offsetLag", c.OffsetLag)
		w.float("timeLagSeconds", timeLag(c, now))
		w.bool("leaseActive", c.LeaseLive)
		w.int("retryCount", int64(c.RetryCount))
		w.endObject()
	}
	if len(cursors) > 0 {
		w.endArray()
		w.endObject()
	}
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// deleteGroup answers DELETE /api/v1/consumer-groups/{group} and
// .../{group}/queues/{queue}; deleteMetadata (default true) also drops the
// subscription record.
func (s *Server) deleteGroup(ctx *fasthttp.RequestCtx, p *params) {
	group, queue := p.get("group"), p.get("queue")
	meta := queryBool(ctx.QueryArgs(), "deleteMetadata", true)
	gd, err := raft.Propose[engine.GroupDeleted](s.ctx, s.prop, engine.DeleteGroupCmd{Group: group, Queue: queue, DeleteMetadata: meta})
	deleted, metaDeleted := gd.Cursors, gd.Metadata
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.bool("success", true)
	w.str("consumerGroup", group)
	if queue != "" {
		w.str("queueName", queue)
	}
	w.int("deletedPartitions", int64(deleted))
	w.bool("metadataDeleted", metaDeleted)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// seek answers POST .../{group}/queues/{queue}/seek and
// .../partitions/{partition}/seek (docs/semantics.md §14): {toEnd:true} or
// {timestamp:ISO}; the per-partition form treats an empty body as toEnd.
func (s *Server) seek(ctx *fasthttp.RequestCtx, p *params) {
	cmd := engine.SeekCmd{Group: p.get("group"), Queue: p.get("queue"), Partition: p.get("partition")}
	hasTimestamp := false
	err := decodeObject(ctx.PostBody(), true, func(sc *scanner, key []byte) (err error) {
		switch string(key) {
		case "toEnd":
			cmd.ToEnd, _, err = sc.optBool("toEnd")
		case "timestamp":
			cmd.Timestamp, hasTimestamp, err = sc.optTime("timestamp")
		default:
			err = sc.skip()
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
	updated, err := raft.Propose[int](s.ctx, s.prop, cmd)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.bool("success", updated > 0)
	w.str("consumerGroup", cmd.Group)
	w.str("queueName", cmd.Queue)
	if cmd.Partition != "" {
		w.str("partitionName", cmd.Partition)
		w.bool("updated", updated > 0)
		if cmd.ToEnd {
			w.str("cursorMovedTo", "end")
		} else {
			w.timeMillis("cursorMovedTo", cmd.Timestamp)
		}
	}
	w.bool("seekToEnd", cmd.ToEnd)
	if cmd.ToEnd {
		w.null("targetTimestamp")
	} else {
		w.timeMillis("targetTimestamp", cmd.Timestamp)
	}
	w.int("partitionsUpdated", int64(updated))
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// updateSubscription answers POST /api/v1/consumer-groups/{group}/subscription.
func (s *Server) updateSubscription(ctx *fasthttp.RequestCtx, p *params) {
	var (
		ts  int64
		has bool
	)
	err := decodeObject(ctx.PostBody(), true, func(sc *scanner, key []byte) (err error) {
		if string(key) != "subscriptionTimestamp" {
			return sc.skip()
		}
		ts, has, err = sc.optTime("subscriptionTimestamp")
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
	updated, err := raft.Propose[int](s.ctx, s.prop, engine.UpdateSubscriptionCmd{Group: group, Timestamp: ts})
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.bool("success", true)
	w.str("consumerGroup", group)
	w.timeMillis("newTimestamp", ts)
	w.int("rowsUpdated", int64(updated))
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}
