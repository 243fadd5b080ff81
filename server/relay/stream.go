package relay

import (
	"encoding/json"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft"
)

// release gives back the lease of a relayed pop answer nobody will read: a
// "retry" ack, relayed to the leader, on the first message of each
// partition (as the server does for a local pop). It carries the pop's own
// Authorization header and not the cluster secret: the follower never acts
// on the leader under an identity of its own.
func (r *Requests) release(pop *fasthttp.Request, resp *fasthttp.Response, addr string) {
	if resp.StatusCode() != fasthttp.StatusOK {
		return
	}
	var popped struct {
		LeaseID  string `json:"leaseId"`
		Group    string `json:"consumerGroup"`
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(resp.Body(), &popped); err != nil || popped.LeaseID == "" {
		return
	}
	type ackItem struct {
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
		LeaseID       string `json:"leaseId"`
		Status        string `json:"status"`
	}
	body := struct {
		Group string    `json:"consumerGroup,omitempty"`
		Acks  []ackItem `json:"acknowledgments"`
	}{Group: popped.Group}
	seen := map[string]bool{}
	for _, m := range popped.Messages {
		if !seen[m.PartitionID] {
			seen[m.PartitionID] = true
			body.Acks = append(body.Acks, ackItem{m.TransactionID, m.PartitionID, popped.LeaseID, "retry"})
		}
	}
	data, err := json.Marshal(body)
	if err != nil || len(body.Acks) == 0 {
		return
	}
	req := fasthttp.AcquireRequest()
	ack := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(ack)
	r.o.Transport.Address(req, addr, "/api/v1/ack/batch")
	req.Header.SetContentType("application/json")
	req.Header.Set(cluster.ForwardedHeader, r.o.NodeID())
	if a := pop.Header.Peek(fasthttp.HeaderAuthorization); len(a) > 0 {
		req.Header.SetBytesV(fasthttp.HeaderAuthorization, a)
	}
	req.SetBody(data)
	if err := r.Do(req, ack, Timeout); err != nil || ack.StatusCode() != fasthttp.StatusOK {
		r.o.Logger.Warn("release abandoned relayed pop", "err", err, "status", ack.StatusCode())
		return
	}
	r.released.Add(len(body.Acks))
}

// Stream relays ctx's request to the leader st names, as Request does,
// and streams the answer back as it comes, without holding it (a backup:
// as long as the store is large). Only a leader that stops sending for
// Timeout fails it.
func (r *Requests) Stream(ctx *fasthttp.RequestCtx, st raft.Status) (relayed bool, err error) {
	if nowhere(ctx, st) {
		return false, nil
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	r.wholeRequest(ctx, req, st, Timeout)
	s, err := r.o.Transport.OpenStream(st.LeaderHTTP, req, Timeout, Timeout)
	if err != nil {
		r.o.Logger.Warn("relay a stream to the leader", "leader", st.Leader, "addr", st.LeaderHTTP, "err", err)
		return true, errors.Join(raft.ErrForward, err)
	}
	resp := s.Response()
	ctx.SetStatusCode(resp.StatusCode())
	for _, h := range []string{fasthttp.HeaderContentType, "Content-Disposition", "Retry-After"} {
		if v := resp.Header.Peek(h); len(v) > 0 {
			ctx.Response.Header.SetBytesV(h, v)
		}
	}
	ctx.SetBodyStream(s, -1) // fasthttp closes it once sent, or the client left
	r.forwarded.Inc()
	return true, nil
}
