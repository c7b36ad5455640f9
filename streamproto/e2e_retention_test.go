package streamproto

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// Ensure size retention keeps about max-length-bytes of whole segments
// (never the active one), as RabbitMQ does, and that a consumer reading
// from first while retention deletes segments under it reads on to the
// end: 400 messages of about 420 bytes in confirmed batches of 20, a 20 KB
// limit and 5 KB segments.
func TestE2ERetentionBySizeKeepsTheLimit(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "ret", stream.NewStreamOptions().
		SetMaxLengthBytes(stream.ByteCapacity{}.KB(20)).SetMaxSegmentSizeBytes(stream.ByteCapacity{}.KB(5)))
	_, sink := e2eSubscribe(t, env, "ret", e2eFrom(stream.OffsetSpecification{}.First()))
	p := e2eNewProducer(t, env, "ret", nil)
	pad := strings.Repeat("p", 400)
	for b := range 20 {
		var bodies []string
		for i := range 20 {
			bodies = append(bodies, fmt.Sprintf("%03d %s", b*20+i, pad))
		}
		p.send(t, bodies, nil)
	}
	s, err := tb.broker.Stream("/", "ret")
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	// No tracking: no snapshot chunks, so message i is offset i. Whole
	// segments beyond the limit go, never the active one: what stays is
	// within a segment (5 KB) of the 20 KB limit.
	kept := st.NextOffset - st.FirstOffset
	if st.NextOffset != 400 || kept < 30 || st.Bytes < 20_000-5_200 || st.Bytes > 20_000+5_200 {
		t.Fatalf("after retention: offsets [%d, %d) in %d bytes, %d segments; want offsets up to 399, about 20 KB kept",
			st.FirstOffset, st.NextOffset, st.Bytes, st.Segments)
	}
	// The consumer reads on to the end, whatever retention deleted under
	// it, and each message it gets is at the offset its number says.
	bodies, offsets := sink.waitUntil(t, "offset 399", func(b []string) bool {
		return len(b) > 0 && strings.HasPrefix(b[len(b)-1], "399 ")
	})
	for i, b := range bodies {
		if want := fmt.Sprintf("%03d ", offsets[i]); !strings.HasPrefix(b, want) || (i > 0 && offsets[i] <= offsets[i-1]) {
			t.Fatalf("delivery %d at offset %d: %.8q", i, offsets[i], b)
		}
	}
}
