package amqp1

import (
	"fmt"
	"testing"

	goamqp "github.com/Azure/go-amqp"
)

// BenchmarkPublishUnsettled measures AMQP 1.0 publishing with go-amqp to
// a classic queue, unsettled (each message accepted once stored), with
// up to 100 deliveries in flight.
func BenchmarkPublishUnsettled(b *testing.B) {
	for _, size := range []int{100, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			tb := startBroker(b, Config{})
			declare(b, tb.channel(b), "q", nil)
			_, s := tb.dial(b, nil)
			snd, err := s.NewSender(ctxT(b), "/queues/q", nil)
			if err != nil {
				b.Fatal(err)
			}
			body := make([]byte, size)
			var receipts []goamqp.SendReceipt
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := snd.SendWithReceipt(ctxT(b), goamqp.NewMessage(body), nil)
				if err != nil {
					b.Fatal(err)
				}
				receipts = append(receipts, r)
				if len(receipts) == 100 || i == b.N-1 {
					for _, r := range receipts {
						if st, err := r.Wait(ctxT(b)); err != nil {
							b.Fatal(err)
						} else if _, ok := st.(*goamqp.StateAccepted); !ok {
							b.Fatalf("state %#v", st)
						}
					}
					receipts = receipts[:0]
				}
			}
		})
	}
}
