package streamproto

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto/wire"
)

// Ensure a stream publisher that floods Publish frames without waiting
// for confirms, while the stream's writer is held, is held by the byte
// credit: the broker never holds more of its frames than the credit plus
// one frame (by the broker's own accounting), its reader stops before
// the client is done, the connection shows "flow", and once the writer
// goes on every message is confirmed once and stored in order.
func TestFlowControlHoldsStreamPublisher(t *testing.T) {
	const (
		credit   = 64 << 10
		frames   = 200
		perFrame = 10
		size     = 1024 // 2 MB in all, 30 times the credit
		n        = frames * perFrame
	)
	var gated atomic.Bool
	release := make(chan struct{})
	tb := startBroker(t, brokerOpts{publishCredit: credit, stream: osiris.Options{BeforeCycle: func() {
		if gated.Load() {
			<-release // a disk that does not write until the test says so
		}
	}}})
	releaseWriter := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseWriter) // before the broker stops (cleanups run last first)

	pub := rawOpen(t, tb, 0)
	pub.create("fs", wire.CodeOK)
	pub.declarePublisher(1, "", "fs", wire.CodeOK)
	gated.Store(true)

	body := func(i int) string { return fmt.Sprintf("%06d-", i) + strings.Repeat("x", size-7) }
	frame := func(f int) []byte {
		b := rawBuf(nil).u8(1).u32(perFrame)
		for i := f * perFrame; i < (f+1)*perFrame; i++ {
			b = b.u64(uint64(i + 1)).simpleEntry(body(i))
		}
		return rawFrame(wire.KeyPublish, 1, b)
	}
	frameLen := len(frame(0)) // every frame's
	written := make(chan error, 1)
	go func() {
		pub.nc.SetWriteDeadline(time.Now().Add(time.Minute))
		for f := range frames {
			if _, err := pub.nc.Write(frame(f)); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()

	var pc *conn
	deadline := time.Now().Add(rawTimeout)
	for pc == nil {
		for _, x := range tb.broker.Conns() {
			if x, ok := x.(*conn); ok && x.credit.Waiting() {
				pc = x
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the publisher's reader was never held by flow control")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A frame holds its buffer and its message slice.
	bound := int64(credit + frameLen + 2*perFrame*int(messageSize))
	if p := pc.credit.Peak(); p > bound {
		t.Errorf("the broker held %d bytes of the publisher's frames; want at most %d (credit %d plus one frame)", p, bound, credit)
	}
	if got := pc.ctr.Received.Load(); got >= n {
		t.Errorf("the held reader had read all %d messages", got)
	}
	if st := pc.Info().State; st != queues.StateFlow {
		t.Errorf("held connection state %q, want %q", st, queues.StateFlow)
	}

	gated.Store(false)
	releaseWriter()
	confirmed := make([]int, n+1)
	for got := 0; got < n; {
		f := pub.next()
		if f.key != wire.KeyPublishConfirm {
			t.Fatalf("got frame 0x%04x, want PublishConfirm", uint16(f.key))
		}
		r := f.fields()
		r.u8()
		for k := r.u32(); k > 0; k-- {
			id := r.u64()
			if id == 0 || id > n {
				t.Fatalf("confirm for unknown publishing id %d", id)
			}
			confirmed[id]++
			got++
		}
	}
	if err := <-written; err != nil {
		t.Fatalf("publish: %v", err)
	}
	for id, k := range confirmed[1:] {
		if k != 1 {
			t.Fatalf("publishing id %d confirmed %d times", id+1, k)
		}
	}
	if p := pc.credit.Peak(); p > bound {
		t.Errorf("the broker held %d bytes of the publisher's frames; want at most %d", p, bound)
	}
	if pc.credit.Holds() == 0 || pc.ctr.FlowHolds.Load() != pc.credit.Holds() {
		t.Errorf("holds: credit %d, warren_flow_control_holds_total's counter %d; want equal, above 0", pc.credit.Holds(), pc.ctr.FlowHolds.Load())
	}
	// A batch gives its credit back just after its confirm is queued.
	for deadline := time.Now().Add(rawTimeout); pc.credit.Held() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of credit still held after every confirm", pc.credit.Held())
		}
	}

	sub := rawOpen(t, tb, 0)
	sub.expectCode(wire.KeySubscribe, rawBuf(nil).u8(1).str("fs").u16(wire.OffsetTypeFirst).u16(1000), wire.CodeOK)
	var got []string
	for len(got) < n {
		f := sub.next()
		if f.key == wire.KeyDeliver {
			got = append(got, simpleEntries(t, checkDeliver(t, f, 1).data)...)
		}
	}
	if len(got) != n {
		t.Fatalf("stream holds %d messages, want %d", len(got), n)
	}
	for i, m := range got {
		if m != body(i) {
			t.Fatalf("message %d is %.12q..., want %.12q...", i, m, body(i))
		}
	}
}
