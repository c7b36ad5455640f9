package streamproto

import (
	"fmt"
	"testing"
	"time"

	"github.com/warren-mq/warren/streamproto/wire"
)

// filterWorkload publishes, with Publish v2, 50 filter values x 20
// messages of 200 bytes, one value per frame so each chunk holds one value
// (as a publisher batching by region, tenant or type does), and returns the
// expected bodies for value "v07".
func filterWorkload(t *testing.T, c *rawConn, stream string) []string {
	t.Helper()
	c.create(stream, wire.CodeOK)
	c.declarePublisher(1, "", stream, wire.CodeOK)
	id := uint64(1)
	var want []string
	for v := 0; v < 50; v++ {
		value := fmt.Sprintf("v%02d", v)
		b := rawBuf(nil).u8(1).u32(20)
		var ids []uint64
		for i := 0; i < 20; i++ {
			body := fmt.Sprintf("%s-%02d-%0186d", value, i, 0)
			if value == "v07" {
				want = append(want, body)
			}
			b = b.u64(id).str(value).simpleEntry(body)
			ids = append(ids, id)
			id++
		}
		c.write(rawFrame(wire.KeyPublish, 2, b))
		c.expectConfirm(1, ids...) // one frame, one write cycle, one chunk
	}
	return want
}

// readDeliveries subscribes with props and counts Deliver frame bytes and
// the bodies matching prefix until the stream's end (no Deliver for 300ms).
func readDeliveries(t *testing.T, c *rawConn, stream string, props ...string) (frameBytes int, chunks int, got []string) {
	t.Helper()
	c.expectCode(wire.KeySubscribe, rawBuf(nil).u8(1).str(stream).u16(wire.OffsetTypeFirst).u16(1000).strMap(props...), wire.CodeOK)
	for {
		f, err := c.readFrame(300 * time.Millisecond)
		if isTimeout(err) {
			return frameBytes, chunks, got
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.key != wire.KeyDeliver {
			t.Fatalf("unexpected frame 0x%04x", uint16(f.key))
		}
		frameBytes += len(f.raw)
		chunks++
		got = append(got, simpleEntries(t, checkDeliver(t, f, 1).data)...)
	}
}

// Ensure Publish v2 filter values feed the chunk Bloom filters and a
// subscription with filter.N gets every message with its value while the
// broker skips the chunks that cannot match; report the bytes saved on a
// 50-value workload.
func TestFilterBandwidth(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	pub := rawOpen(t, tb, 0)
	want := filterWorkload(t, pub, "f")

	allBytes, allChunks, all := readDeliveries(t, rawOpen(t, tb, 0), "f")
	if len(all) != 50*20 || allChunks != 50 {
		t.Fatalf("unfiltered: %d messages in %d chunks", len(all), allChunks)
	}
	fBytes, fChunks, got := readDeliveries(t, rawOpen(t, tb, 0), "f", "filter.0", "v07")
	var matched []string
	for _, m := range got {
		if m[:3] == "v07" { // the client-side post-filter
			matched = append(matched, m)
		}
	}
	if fmt.Sprint(matched) != fmt.Sprint(want) {
		t.Fatalf("filtered subscription got %d v07 messages, want %d", len(matched), len(want))
	}
	// A 16-byte filter has false positives; with one value per chunk they
	// are rare. Far fewer chunks than 50 must be sent.
	if fChunks > 5 {
		t.Fatalf("filter let %d of 50 chunks through", fChunks)
	}
	t.Logf("50 filter values x 20 messages: unfiltered %d bytes in %d chunks; filter.0=v07 %d bytes in %d chunks (%.1f%%)",
		allBytes, allChunks, fBytes, fChunks, 100*float64(fBytes)/float64(allBytes))

	// match-unfiltered also brings chunks without filter values.
	pub.declarePublisher(2, "", "f", wire.CodeOK)
	pub.publish(2, 1, "plain-1")
	pub.expectConfirm(2, 1)
	_, _, got = readDeliveries(t, rawOpen(t, tb, 0), "f", "filter.0", "v07", "match-unfiltered", "true")
	if got[len(got)-1] != "plain-1" {
		t.Fatalf("match-unfiltered did not deliver the unfiltered chunk: last %q", got[len(got)-1])
	}
	_, _, got = readDeliveries(t, rawOpen(t, tb, 0), "f", "filter.0", "v07")
	for _, m := range got {
		if m == "plain-1" {
			t.Fatal("unfiltered chunk delivered without match-unfiltered")
		}
	}
}
