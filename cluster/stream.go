package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
)

// Answers streamed between nodes: a backup, as long as the store is large,
// is never held whole. The request goes over a connection of its own, the
// answer's head is read, and its body is read from the connection as the
// reader asks for it. Only a node that stops sending for the idle bound
// fails the read; the connection is closed with the stream.

// Stream is an answer whose body is read as it comes.
type Stream struct {
	resp *fasthttp.Response
	conn net.Conn
}

var _ io.ReadCloser = (*Stream)(nil)

// OpenStream sends req to the node at addr on a connection of its own
// (Dial) and reads the answer's head, each within head; then the body
// fails only once the node sends nothing for idle.
func (t *Transport) OpenStream(addr string, req *fasthttp.Request, head, idle time.Duration) (*Stream, error) {
	conn, err := t.Dial(addr, head)
	if err != nil {
		return nil, err
	}
	conn.SetWriteDeadline(time.Now().Add(head))
	bw := bufio.NewWriter(conn)
	if err = req.Write(bw); err == nil {
		err = bw.Flush()
	}
	resp := fasthttp.AcquireResponse()
	resp.StreamBody = true
	r := &idleReader{conn: conn, idle: head}
	if err == nil {
		err = resp.Read(bufio.NewReaderSize(r, 64<<10))
	}
	if err != nil {
		conn.Close()
		fasthttp.ReleaseResponse(resp)
		return nil, err
	}
	r.idle = idle
	return &Stream{resp: resp, conn: conn}, nil
}

// Response is the answer's status and headers (its body is the Stream's).
func (s *Stream) Response() *fasthttp.Response { return s.resp }

func (s *Stream) Read(p []byte) (int, error) { return s.resp.BodyStream().Read(p) }

// Close drops the connection: the sending node's write fails, and it lets
// go of what it streamed from.
func (s *Stream) Close() error {
	s.conn.Close()
	s.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(s.resp)
	return nil
}

// idleReader pushes the connection's read deadline on at every read.
type idleReader struct {
	conn net.Conn
	idle time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.conn.SetReadDeadline(time.Now().Add(r.idle))
	return r.conn.Read(p)
}

// BackupIdle is how long a backup stream from another node may send
// nothing before it is given up. The node assembling a backup reads the
// groups one after another, so a group's stream waits, unread, while the
// groups before it are written: the sending node allows as long
// (server: the backup route's write deadline).
const BackupIdle = 30 * time.Minute

// Backup asks the node at addr for a backup file (engine/backup) of group
// g alone, read from its replica once it has applied as far as g's read
// index, and answers it as a stream to read and close. A failure to reach
// the node is raft.ErrForward; a refusal is the error Options.Refusal
// reads in it (a node that does not host g: raft.ErrNotLeader).
func (c *Client) Backup(ctx context.Context, addr string, g uint32) (*Stream, error) {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	c.nodeRequest(req, addr, BackupPath, g, timeoutFor(ctx))
	s, err := c.transport.OpenStream(addr, req, timeoutFor(ctx), BackupIdle)
	if err != nil {
		return nil, errors.Join(raft.ErrForward, fmt.Errorf("backup of group %d at %s: %w", g, addr, err))
	}
	if s.resp.StatusCode() != fasthttp.StatusOK {
		defer s.Close()
		body, _ := io.ReadAll(io.LimitReader(s, 64<<10))
		return nil, c.refused(s.resp.StatusCode(), body)
	}
	return s, nil
}
