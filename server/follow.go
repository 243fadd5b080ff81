package server

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/queenmq/queen/raft"
)

// followLoop calls each every interval while this node follows a leader
// whose HTTP address it knows (the storage reports, the analytics
// shipments). Those calls carry the cluster secret: without one it logs
// noSecret once and stops.
func (s *Server) followLoop(stop <-chan struct{}, every time.Duration, noSecret string, each func(st raft.Status)) {
	defer s.loops.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		st := s.broker.Status()
		if st.Role == "leader" || st.LeaderHTTP == "" || st.Leader == "" || st.Leader == st.ID {
			continue
		}
		if s.opts.ClusterSecret == "" {
			s.log.Warn(noSecret)
			return
		}
		each(st)
	}
}

// changeLog logs a loop's outcome when it changes: the first failure (and
// a different one), and the first success after failures.
type changeLog struct{ last string }

func (c *changeLog) note(log *slog.Logger, err error, failed, recovered string, args ...any) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case msg == c.last:
	case msg != "":
		log.Warn(failed, append(args, "err", msg)...)
	default:
		log.Info(recovered, args...)
	}
	c.last = msg
}

// postToLeader posts a JSON body to path on the leader at addr
// (relay.Requests.Post) and returns the answer's body when its status is
// want.
func (s *Server) postToLeader(addr, path string, body []byte, timeout time.Duration, want int) ([]byte, error) {
	status, answer, err := s.relay.Post(addr, path, body, timeout)
	if err == nil && status != want {
		err = fmt.Errorf("leader answered %d: %s", status, answer)
	}
	return answer, err
}
