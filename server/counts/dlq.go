package counts

import "github.com/queenmq/queen/engine"

// DLQLimit caps the rows read to break dead letters down by queue and
// partition; above it the breakdown covers the newest DLQLimit rows.
const DLQLimit = 10000

// DLQ breaks the dead-letter queue (of one queue, or all) down. Total is
// every dead letter; the maps count the rows read (at most DLQLimit).
type DLQ struct {
	Total       int
	ByQueue     map[string]int64
	ByPartition map[engine.ID]int64
	ByError     map[string]int64
}

// DLQLister is the broker's dead-letter listing (package server's Broker).
type DLQLister interface {
	ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error)
}

// SummarizeDLQ reads the dead letters of queue ("" for every queue) from b
// and breaks them down: one call for the total, one for the rows.
func SummarizeDLQ(b DLQLister, queue string) (DLQ, error) {
	sum := DLQ{ByQueue: map[string]int64{}, ByPartition: map[engine.ID]int64{}, ByError: map[string]int64{}}
	_, total, err := b.ListDLQ(engine.DLQFilter{Queue: queue, Limit: 1})
	if err != nil || total == 0 {
		return sum, err
	}
	sum.Total = total
	rows, _, err := b.ListDLQ(engine.DLQFilter{Queue: queue, Limit: min(total, DLQLimit)})
	if err != nil {
		return sum, err
	}
	for i := range rows {
		sum.ByQueue[rows[i].Queue]++
		sum.ByPartition[rows[i].PartitionID]++
		sum.ByError[rows[i].Error]++
	}
	return sum, nil
}
