package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/bodies"
	"github.com/queenmq/queen/server/wire"
)

// configure answers POST /api/v1/configure (docs/decisions.md C5): options merge into the
// queue's configuration, an explicit null resets one, "replace": true resets
// every option not given. namespace/task strings set the labels; absent or
// null keeps them (the JS SDK always sends null when unset).
func (s *Server) configure(ctx *fasthttp.RequestCtx, _ *params) {
	var (
		cmd      engine.ConfigureCmd
		hasQueue bool
		group    int64
	)
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "queue":
			cmd.Queue, hasQueue, err = sc.OptString("queue")
		case "namespace":
			cmd.Namespace, cmd.NamespaceSet, err = sc.OptString("namespace")
		case "task":
			cmd.Task, cmd.TaskSet, err = sc.OptString("task")
		case "replace":
			cmd.Replace, _, err = sc.OptBool("replace")
		case "raftGroup":
			group, _, err = sc.OptInt("raftGroup")
		case "options":
			switch sc.Peek() {
			case 'n':
				return sc.Literal("null")
			case '{':
				return sc.Object(func(sc *wire.Scanner, key []byte) error { return decodeOption(sc, key, &cmd) })
			}
			return bodies.SkipThen(sc, badRequest("options must be an object"))
		default:
			return sc.Skip()
		}
		return err
	})
	if err == nil && (!hasQueue || cmd.Queue == "") {
		err = badRequest("queue is required")
	}
	if err == nil {
		err = bodies.Name("queue", cmd.Queue)
	}
	var placed uint32
	if err == nil {
		placed, err = s.groups.place(s.ctx, cmd.Queue, group)
	}
	if err != nil {
		s.forwardOrFail(ctx, err) // placing proposes on the directory
		return
	}
	info, err := raft.Propose[engine.QueueInfo](s.ctx, s.forwarding(ctx), cmd)
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	if s.crypt == nil && info.Config.Bool(engine.OptEncryptionEnabled) {
		s.log.Warn("queue has encryptionEnabled but QUEEN_ENCRYPTION_KEY is not set: its payloads are stored in plaintext",
			"queue", info.Name)
	}
	w := startReply(ctx)
	w.Object("")
	w.Bool("configured", true)
	w.ID("queueId", info.ID)
	for i := range info.Partitions {
		if info.Partitions[i].Name == engine.DefaultPartition {
			w.ID("partitionId", info.Partitions[i].ID)
		}
	}
	w.Str("queue", info.Name)
	w.Str("namespace", info.Namespace)
	w.Str("task", info.Task)
	writeOptions(&w, "options", info.Config)
	if placed != 0 {
		w.Int("raftGroup", int64(placed))
	}
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// decodeOption reads one member of configure's options. Unknown keys are
// ignored; null resets the option (docs/decisions.md C5); ints must be non-negative integers,
// booleans booleans.
func decodeOption(sc *wire.Scanner, key []byte, cmd *engine.ConfigureCmd) error {
	o, ok := engine.OptionByName(string(key))
	if !ok {
		return sc.Skip()
	}
	if sc.Peek() == 'n' {
		cmd.Reset = append(cmd.Reset, o)
		return sc.Literal("null")
	}
	var v int64
	if o.Kind() == engine.KindBool {
		b, _, err := sc.OptBool(o.Name())
		if err != nil {
			return err
		}
		if b {
			v = 1
		}
	} else {
		var err error
		if v, _, err = sc.OptInt(o.Name()); err != nil {
			return err
		}
		if v < 0 {
			return badRequest(o.Name() + " must not be negative")
		}
	}
	cmd.Set = append(cmd.Set, engine.OptionValue{Option: o, Value: v})
	return nil
}

// writeOptions writes every option with its effective value; booleans as
// JSON booleans.
func writeOptions(w *wire.Writer, k string, c engine.Config) {
	w.Object(k)
	for _, o := range engine.AllOptions() {
		if o.Kind() == engine.KindBool {
			w.Bool(o.Name(), c.Bool(o))
		} else {
			w.Int(o.Name(), c.Get(o))
		}
	}
	w.EndObject()
}
