package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/counts"
)

// The message counts of the status and resource routes are package counts;
// this file reads what they are computed from.

// queueGroup is a queue's Raft group, 0 while it has none or when one
// group holds every queue.
func (s *Server) queueGroup(queue string) uint32 {
	return s.groups.placement(queue)
}

func (s *Server) queuesAndDLQ() ([]engine.QueueInfo, counts.DLQ, error) {
	qs, err := s.broker.Queues()
	if err != nil {
		return nil, counts.DLQ{}, err
	}
	dlq, err := counts.SummarizeDLQ(s.broker, "")
	return qs, dlq, err
}

// queueWithDLQ describes one queue with its dead-letter summary: what the
// two per-queue admin views share.
func (s *Server) queueWithDLQ(name string) (engine.QueueInfo, counts.DLQ, error) {
	q, err := s.broker.Queue(name)
	if err != nil {
		return q, counts.DLQ{}, err
	}
	dlq, err := counts.SummarizeDLQ(s.broker, q.Name)
	return q, dlq, err
}

// filterQueues returns the queues matching the namespace and task query
// filters, newest first.
func filterQueues(args *fasthttp.Args, qs []engine.QueueInfo) []engine.QueueInfo {
	return counts.Filter(qs, queryString(args, "namespace"), queryString(args, "task"))
}
