package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
)

// HealthPath is the route every node has answered since the first
// version, without credentials: what NodeVersion reads.
const HealthPath = "/health"

// NodeVersion reads what the node at addr advertises (raft.VersionReader):
// its id, binary version ("version") and command version
// ("commandVersion") from its /health, which answers 503 with the same body
// when the node is unhealthy, and what it holds of the other servers'
// ("nodes"). A node too old to send commandVersion
// answers 0, which the reader counts as version 1. An answer that is not
// such a body is an error: the node counts as version 1 too.
func (c *Client) NodeVersion(ctx context.Context, addr string) (raft.NodeVersion, error) {
	timeout := timeoutFor(ctx)
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.transport.Scheme() + "://" + addr + HealthPath)
	if err := c.transport.Do(req, resp, timeout); err != nil {
		return raft.NodeVersion{}, fmt.Errorf("version of %s: %w", addr, err)
	}
	type nodeVersion struct {
		ID             string `json:"id"`
		Version        string `json:"version"`
		CommandVersion uint8  `json:"commandVersion"`
		Known          bool   `json:"known"`
	}
	var h struct {
		ID             string        `json:"id"`
		Server         string        `json:"server"`
		Version        string        `json:"version"`
		CommandVersion uint8         `json:"commandVersion"`
		Nodes          []nodeVersion `json:"nodes"`
	}
	if err := json.Unmarshal(resp.Body(), &h); err != nil {
		return raft.NodeVersion{}, fmt.Errorf("version of %s: %d: %w", addr, resp.StatusCode(), err)
	}
	if h.Server != "queen" || h.ID == "" {
		return raft.NodeVersion{}, fmt.Errorf("version of %s: %w", addr, errors.New("not a queen node's /health"))
	}
	v := raft.NodeVersion{ID: h.ID, Binary: h.Version, Command: h.CommandVersion}
	for _, o := range h.Nodes {
		v.Others = append(v.Others, raft.NodeVersion{ID: o.ID, Binary: o.Version, Command: o.CommandVersion, Known: o.Known})
	}
	return v, nil
}
