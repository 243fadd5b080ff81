package bench

import (
	"fmt"
	"math/rand/v2"
)

// MinPayloadSize is the smallest payload Payloads can shape as valid JSON.
const MinPayloadSize = 16

var payloadWords = []string{"express", "standard", "gift", "fragile", "priority", "return", "backorder",
	"warehouse", "north", "south", "east", "west", "pending", "paid", "invoiced", "shipped"}

// Payloads returns n distinct JSON documents of exactly size bytes each (size
// at least MinPayloadSize), generated from seed: an order with a customer,
// lines and a free-text note, so that compression sees what a broker usually
// carries rather than repeated bytes. Documents too small for an order are a
// short record padded the same way.
func Payloads(n, size int, seed uint64) [][]byte {
	if size < MinPayloadSize {
		panic(fmt.Sprintf("bench: payload size %d below %d", size, MinPayloadSize))
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	word := func() string { return payloadWords[rng.IntN(len(payloadWords))] }
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, 0, size+256)
		if size >= 320 {
			b = fmt.Appendf(b, `{"orderId":"ord-%08d","createdAt":"2026-01-02T03:04:%02d.%06dZ","customer":{"id":%d,"email":"user%d@example.com","tier":%q},"currency":"EUR","lines":[`,
				rng.IntN(1e8), rng.IntN(60), rng.IntN(1e6), rng.IntN(1e6), rng.IntN(1e6), word())
			for l := 0; ; l++ {
				if l > 0 {
					b = append(b, ',')
				}
				b = fmt.Appendf(b, `{"sku":"SKU-%06d","qty":%d,"price":%d.%02d,"tags":[%q,%q]}`,
					rng.IntN(1e6), 1+rng.IntN(9), rng.IntN(500), rng.IntN(100), word(), word())
				if len(b) > size-200 {
					break
				}
			}
			b = append(b, `],"note":"`...)
		} else {
			b = fmt.Appendf(b, `{"id":%d,"note":"`, rng.IntN(1e6))
			if len(b) > size-2 {
				b = append(b[:0], `{"n":"`...)
			}
		}
		for len(b) < size-2 {
			b = append(b, word()...)
			b = append(b, ' ')
		}
		out[i] = append(b[:size-2], `"}`...)
	}
	return out
}
