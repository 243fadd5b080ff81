package bench

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/queenmq/queen/engine/segment"
)

// segmentOrder is a realistic ~1 KiB message body: an e-commerce order.
type segmentOrder struct {
	OrderID    string             `json:"orderId"`
	CustomerID string             `json:"customerId"`
	Customer   segmentCustomer    `json:"customer"`
	Items      []segmentOrderItem `json:"items"`
	Total      float64            `json:"total"`
	Currency   string             `json:"currency"`
	Status     string             `json:"status"`
	CreatedAt  string             `json:"createdAt"`
	Shipping   segmentAddress     `json:"shipping"`
	Notes      string             `json:"notes,omitempty"`
}

type segmentCustomer struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Tier  string `json:"tier"`
}

type segmentOrderItem struct {
	SKU       string  `json:"sku"`
	Name      string  `json:"name"`
	Quantity  int     `json:"quantity"`
	UnitPrice float64 `json:"unitPrice"`
}

type segmentAddress struct {
	Street     string `json:"street"`
	City       string `json:"city"`
	PostalCode string `json:"postalCode"`
	Country    string `json:"country"`
}

var (
	benchFirstNames = []string{"Ada", "Grace", "Linus", "Margaret", "Ken", "Barbara", "Dennis", "Frances", "Edsger", "Radia"}
	benchLastNames  = []string{"Lovelace", "Hopper", "Torvalds", "Hamilton", "Thompson", "Liskov", "Ritchie", "Allen", "Dijkstra", "Perlman"}
	benchProducts   = []string{"Mechanical Keyboard", "USB-C Hub", "4K Monitor", "Noise Cancelling Headphones", "Ergonomic Mouse", "Laptop Stand", "Webcam 1080p", "Desk Lamp", "Thunderbolt Dock", "Portable SSD 1TB"}
	benchCities     = []string{"Berlin", "Lisbon", "Toronto", "Osaka", "Austin", "Nairobi", "Melbourne", "Oslo"}
	benchCountries  = []string{"DE", "PT", "CA", "JP", "US", "KE", "AU", "NO"}
	benchStatuses   = []string{"pending", "paid", "shipped", "delivered", "refunded"}
	benchTiers      = []string{"bronze", "silver", "gold"}
)

// segmentFrames returns n frames carrying ~1 KiB JSON orders, generated from
// a fixed seed so every run measures the same bytes.
func segmentFrames(n int) []segment.Frame {
	rng := rand.New(rand.NewPCG(20250801, 1))
	hex := func(n int) string {
		const digits = "0123456789abcdef"
		b := make([]byte, n)
		for i := range b {
			b[i] = digits[rng.IntN(16)]
		}
		return string(b)
	}
	start := time.Date(2025, 8, 1, 9, 0, 0, 0, time.UTC)
	frames := make([]segment.Frame, n)
	for i := range frames {
		at := start.Add(time.Duration(i)*137*time.Millisecond + time.Duration(rng.IntN(1000))*time.Microsecond)
		first, last := benchFirstNames[rng.IntN(len(benchFirstNames))], benchLastNames[rng.IntN(len(benchLastNames))]
		city := rng.IntN(len(benchCities))
		o := segmentOrder{
			OrderID:    fmt.Sprintf("ord-%08d", 4_200_000+i),
			CustomerID: "cus_" + hex(14),
			Customer:   segmentCustomer{Name: first + " " + last, Email: fmt.Sprintf("%s.%s%d@example.com", first, last, rng.IntN(1000)), Tier: benchTiers[rng.IntN(len(benchTiers))]},
			Currency:   "EUR",
			Status:     benchStatuses[rng.IntN(len(benchStatuses))],
			CreatedAt:  at.Format(time.RFC3339Nano),
			Shipping: segmentAddress{
				Street:     fmt.Sprintf("%d %s Street", 1+rng.IntN(300), benchLastNames[rng.IntN(len(benchLastNames))]),
				City:       benchCities[city],
				PostalCode: fmt.Sprintf("%05d", rng.IntN(100000)),
				Country:    benchCountries[city],
			},
		}
		if rng.IntN(4) == 0 {
			o.Notes = "Leave at the front desk; call " + fmt.Sprintf("+49 30 %07d", rng.IntN(10_000_000)) + " on arrival."
		}
		for {
			item := segmentOrderItem{
				SKU:       fmt.Sprintf("SKU-%05d", rng.IntN(50_000)),
				Name:      benchProducts[rng.IntN(len(benchProducts))],
				Quantity:  1 + rng.IntN(5),
				UnitPrice: float64(499+rng.IntN(50_000)) / 100,
			}
			o.Items = append(o.Items, item)
			o.Total += float64(item.Quantity) * item.UnitPrice
			if payload, _ := json.Marshal(o); len(payload) >= 1000 {
				break
			}
		}
		payload, err := json.Marshal(o)
		if err != nil {
			panic(err)
		}
		f := segment.Frame{TransactionID: []byte("txn-" + hex(24)), Payload: payload}
		binary.BigEndian.PutUint64(f.MessageID[:], uint64(at.UnixMilli())<<16|0x7000|uint64(rng.IntN(0x1000)))
		binary.BigEndian.PutUint64(f.MessageID[8:], rng.Uint64())
		if rng.IntN(2) == 0 {
			f.HasTrace = true
			binary.BigEndian.PutUint64(f.TraceID[:], rng.Uint64())
			binary.BigEndian.PutUint64(f.TraceID[8:], rng.Uint64())
		}
		if rng.IntN(3) == 0 {
			f.ProducerSub = []byte("auth0|" + hex(24))
		}
		frames[i] = f
	}
	return frames
}

// segmentCases runs fn for 1 and 100 frames under each codec, with the raw
// size set for MB/s and the compression ratio reported.
func segmentCases(b *testing.B, fn func(b *testing.B, codec segment.Codec, frames []segment.Frame, enc []byte)) {
	const base, createdAt = 4_200_000, 1_754_038_800_000_000
	for _, n := range []int{1, 100} {
		frames := segmentFrames(n)
		for _, codec := range []segment.Codec{segment.CodecNone, segment.CodecZstd} {
			b.Run(fmt.Sprintf("frames=%d/codec=%s", n, codec), func(b *testing.B) {
				enc, err := segment.EncodeCodec(nil, codec, base, createdAt, frames)
				if err != nil {
					b.Fatal(err)
				}
				h, err := segment.ReadHeader(enc)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(h.RawLen))
				b.ReportAllocs()
				fn(b, codec, frames, enc)
				b.ReportMetric(float64(h.RawLen)/float64(len(enc)), "ratio")
				b.ReportMetric(float64(b.N*len(frames))/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

func BenchmarkSegmentEncode(b *testing.B) {
	segmentCases(b, func(b *testing.B, codec segment.Codec, frames []segment.Frame, enc []byte) {
		dst := make([]byte, 0, 2*len(enc))
		for b.Loop() {
			var err error
			if dst, err = segment.EncodeCodec(dst[:0], codec, 4_200_000, 1_754_038_800_000_000, frames); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSegmentDecode(b *testing.B) {
	segmentCases(b, func(b *testing.B, _ segment.Codec, frames []segment.Frame, enc []byte) {
		for b.Loop() {
			seg, err := segment.Decode(enc)
			if err != nil {
				b.Fatal(err)
			}
			if len(seg.Frames) != len(frames) {
				b.Fatalf("decoded %d frames, want %d", len(seg.Frames), len(frames))
			}
		}
	})
}
