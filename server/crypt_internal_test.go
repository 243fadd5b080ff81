package server

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/server/envelope"
)

// vectorKeyHex is a valid QUEEN_ENCRYPTION_KEY (the test vector's key in
// server/envelope).
const vectorKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

// engineBroker answers the push path with canned results but reads queue
// configurations from a real engine, with (Fast) or without the cheap
// QueueConfig lookup, so the benchmarks measure the edge's cost of
// encryption.
type engineBroker struct {
	stubBroker
	e *engine.Engine
}

func (b engineBroker) Queue(name string) (engine.QueueInfo, error) { return b.e.Queue(name) }

type engineBrokerFast struct{ engineBroker }

func (b engineBrokerFast) QueueConfig(name string) (engine.Config, bool) {
	return b.e.QueueConfig(name)
}

// configuredEngine opens an engine with queue "orders" (encryptionEnabled
// as given) holding partitions partitions, each with one consumer group.
func configuredEngine(b *testing.B, encrypted bool, partitions int) *engine.Engine {
	h := enginetest.MustOpen(b)
	var v int64
	if encrypted {
		v = 1
	}
	h.Configure(engine.ConfigureCmd{Queue: "orders", Set: []engine.OptionValue{{Option: engine.OptEncryptionEnabled, Value: v}}})
	var items []engine.PushItem
	for i := range partitions {
		items = append(items, engine.PushItem{Queue: "orders", Partition: fmt.Sprint("p", i), Payload: []byte(`{}`)})
	}
	h.Push(items...)
	for i := range partitions {
		h.Pop(engine.PopCmd{Queue: "orders", Partition: fmt.Sprint("p", i), Group: "g", Batch: 1, Partitions: 1})
	}
	return h.Engine
}

// BenchmarkPush100Encrypted compares a 100-item push (1 KB payloads) with
// no key, with a key to an unencrypted queue (the flag looked up through
// QueueInfo or QueueConfig, for a queue of 1 or 1000 partitions), and
// sealing every payload.
func BenchmarkPush100Encrypted(b *testing.B) {
	var items []string
	payload := `{"orderId":12345,"customer":"c-77","lines":[{"sku":"A1","qty":2},{"sku":"B7","qty":1}],"note":"` + strings.Repeat("x", 900) + `"}`
	for i := range 100 {
		items = append(items, fmt.Sprintf(`{"queue":"orders","partition":"Default","payload":%s,"transactionId":"0190b0f0-0000-7000-8000-%012d"}`, payload, i))
	}
	body := `{"items":[` + strings.Join(items, ",") + `]}`
	for _, bc := range []struct {
		name       string
		key        bool
		encrypted  bool
		fast       bool
		partitions int
	}{
		{"NoKey", false, true, false, 1},
		{"KeyPlainQueue/QueueInfo/1part", true, false, false, 1},
		{"KeyPlainQueue/QueueInfo/1000parts", true, false, false, 1000},
		{"KeyPlainQueue/QueueConfig/1000parts", true, false, true, 1000},
		{"KeyEncryptedQueue/QueueConfig/1part", true, true, true, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := configuredEngine(b, bc.encrypted, bc.partitions)
			var broker Broker = engineBroker{e: e}
			if bc.fast {
				broker = engineBrokerFast{engineBroker{e: e}}
			}
			opts := Options{Logger: slog.New(slog.DiscardHandler)}
			if bc.key {
				opts.EncryptionKey = vectorKeyHex
			}
			s, err := New(broker, opts)
			if err != nil {
				b.Fatal(err)
			}
			run(b, s, "POST", "/api/v1/push", body, 201)
		})
	}
}

// BenchmarkQueueLookup is the per-request flag lookup alone.
func BenchmarkQueueLookup(b *testing.B) {
	for _, parts := range []int{1, 1000} {
		e := configuredEngine(b, true, parts)
		b.Run(fmt.Sprintf("QueueInfo/%dparts", parts), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if info, err := e.Queue("orders"); err != nil || !info.Config.Bool(engine.OptEncryptionEnabled) {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("QueueConfig/%dparts", parts), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if cfg, ok := e.QueueConfig("orders"); !ok || !cfg.Bool(engine.OptEncryptionEnabled) {
					b.Fatal("not found")
				}
			}
		})
	}
}

// BenchmarkPop100Encrypted is BenchmarkPop100 with every payload sealed.
func BenchmarkPop100Encrypted(b *testing.B) {
	key, err := envelope.ParseKey(vectorKeyHex)
	if err != nil {
		b.Fatal(err)
	}
	c, err := envelope.NewCipher(key, metrics.NewSet())
	if err != nil {
		b.Fatal(err)
	}
	payload := c.Seal([]byte(`{"orderId":12345,"customer":"c-77","note":"` + strings.Repeat("x", 900) + `"}`))
	res := engine.PopResult{Group: engine.QueueMode, LeaseID: engine.ID{1},
		Claims: []engine.Claim{{Queue: "orders", Partition: "Default", PartitionID: engine.ID{2}, LeaseExpiresAt: 1 << 50}}}
	for i := range 100 {
		res.Messages = append(res.Messages, engine.Message{ID: engine.ID{byte(i)}, TransactionID: fmt.Sprint("t", i),
			Payload: payload, Sealed: true, CreatedAt: 1 << 50, Queue: "orders", Partition: "Default", PartitionID: engine.ID{2}, Attempt: 1})
	}
	s, err := New(stubBroker{pop: res}, Options{Logger: slog.New(slog.DiscardHandler), EncryptionKey: vectorKeyHex})
	if err != nil {
		b.Fatal(err)
	}
	run(b, s, "GET", "/api/v1/pop/queue/orders?batch=100&wait=false", "", 200)
}
