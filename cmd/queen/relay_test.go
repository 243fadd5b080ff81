package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// parked reads a node's queen_pop_parked gauge: long-polls parked there.
func (c *cluster) parked(n *qnode) (int, string) {
	code, body, err := c.do(3*time.Second, "GET", n.url("/metrics/prometheus"), nil)
	if err != nil || code != http.StatusOK {
		return -1, fmt.Sprintf("metrics of %s: %d %v", n.id, code, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "queen_pop_parked "); ok {
			k, _ := strconv.Atoi(v)
			return k, fmt.Sprintf("%s parks %d", n.id, k)
		}
	}
	return -1, "no queen_pop_parked on " + n.id
}

// parkRelayedPoll starts three nodes, configures queue with a 300 s lease
// and parks a long-poll on it through a follower, over a raw connection the
// caller closes to play a consumer that leaves.
func parkRelayedPoll(t *testing.T, queue string) (c *cluster, leader, follower *qnode, conn net.Conn) {
	c = startLoopback(t, 3)
	// Converged: every follower has applied the leader's HTTP address.
	leader, _ = c.waitConverged(c.nodes, 20*time.Second)
	follower = c.others(leader)[0]
	code, body, err := c.do(5*time.Second, "POST", leader.url("/api/v1/configure"),
		[]byte(`{"queue":"`+queue+`","options":{"leaseTime":300}}`))
	if err != nil || code != http.StatusOK {
		t.Fatalf("configure: %d %v %s", code, err, body)
	}
	conn, err = net.Dial("tcp", follower.http)
	if err != nil {
		t.Fatal(err)
	}
	req := "GET /api/v1/pop/queue/" + queue + "?batch=1&wait=true&timeout=30000 HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the relayed poll to park on the leader", func() (bool, string) {
		k, desc := c.parked(leader)
		return k == 1, desc
	})
	return c, leader, follower, conn
}

// TestCluster_RelayedLongPollEndsWhenItsClientLeaves: a consumer long-polls
// through a follower, which relays the poll to the leader, where it parks.
// The consumer goes away. The poll must end on the leader too, without
// taking a lease: a message pushed afterwards goes at once to the next
// consumer, not to nobody for the lease time (300 s here).
func TestCluster_RelayedLongPollEndsWhenItsClientLeaves(t *testing.T) {
	t.Parallel()
	c, leader, follower, conn := parkRelayedPoll(t, "relay")
	conn.Close()
	waitFor(t, 5*time.Second, "the leader to end the abandoned poll", func() (bool, string) {
		k, desc := c.parked(leader)
		return k == 0, desc
	})

	c.mustPush([]*qnode{leader}, 10*time.Second, []pushItem{{Queue: "relay", TransactionID: "after", Payload: 1}})
	code, body, err := c.do(5*time.Second, "GET", follower.url("/api/v1/pop/queue/relay?batch=1"), nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("pop through the follower after the abandoned poll: %d %v %s", code, err, body)
	}
	var pop struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &pop); err != nil || len(pop.Messages) != 1 || pop.Messages[0].TransactionID != "after" {
		t.Fatalf("pop = %s (%v)", body, err)
	}
}

// TestCluster_RelayedLongPollRacingAPushReleasesTheLease: the consumer of a
// relayed long-poll leaves and a push lands at once, before the follower
// has looked at its client. Whichever side sees it first (the leader its
// relay gone, or the follower its client gone with the answer in hand), the
// message must be poppable again long before its 300 s lease ends: the
// window is 30 s, generous for race-built nodes beside two CPU burners (5 s
// was not, once).
func TestCluster_RelayedLongPollRacingAPushReleasesTheLease(t *testing.T) {
	t.Parallel()
	c, leader, follower, conn := parkRelayedPoll(t, "race")
	conn.Close()
	c.mustPush([]*qnode{leader}, 10*time.Second, []pushItem{{Queue: "race", TransactionID: "raced", Payload: 1}})
	waitFor(t, 30*time.Second, "the raced message to be poppable again", func() (bool, string) {
		code, body, err := c.do(5*time.Second, "GET", follower.url("/api/v1/pop/queue/race?batch=1"), nil)
		return err == nil && code == http.StatusOK && strings.Contains(string(body), `"raced"`), fmt.Sprintf("%d %v %s", code, err, body)
	})
}
