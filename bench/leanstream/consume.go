package leanstream

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/warren-mq/warren/streamproto/wire"
)

// OffsetSpec is where a subscription starts. Build one with First, Last,
// Next, Offset or Timestamp.
type OffsetSpec struct {
	kind  uint16
	value uint64
}

// First starts at the oldest message.
func First() OffsetSpec { return OffsetSpec{kind: wire.OffsetTypeFirst} }

// Last starts at the last chunk.
func Last() OffsetSpec { return OffsetSpec{kind: wire.OffsetTypeLast} }

// Next starts after the last message: new messages only.
func Next() OffsetSpec { return OffsetSpec{kind: wire.OffsetTypeNext} }

// Offset starts at offset n.
func Offset(n uint64) OffsetSpec { return OffsetSpec{kind: wire.OffsetTypeOffset, value: n} }

// Timestamp starts at the first chunk written at or after ms (Unix
// milliseconds).
func Timestamp(ms int64) OffsetSpec {
	return OffsetSpec{kind: wire.OffsetTypeTimestamp, value: uint64(ms)}
}

// String returns first, last, next, offset:N or timestamp:MS.
func (o OffsetSpec) String() string {
	switch o.kind {
	case wire.OffsetTypeFirst:
		return "first"
	case wire.OffsetTypeLast:
		return "last"
	case wire.OffsetTypeNext:
		return "next"
	case wire.OffsetTypeOffset:
		return "offset:" + strconv.FormatUint(o.value, 10)
	case wire.OffsetTypeTimestamp:
		return "timestamp:" + strconv.FormatInt(int64(o.value), 10)
	}
	return "invalid"
}

// ParseOffsetSpec parses first, last, next, offset:N or timestamp:MS.
func ParseOffsetSpec(s string) (OffsetSpec, error) {
	kind, arg, hasArg := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	switch {
	case !hasArg && (kind == "first" || kind == ""):
		return First(), nil
	case !hasArg && kind == "last":
		return Last(), nil
	case !hasArg && kind == "next":
		return Next(), nil
	case hasArg && kind == "offset":
		n, err := strconv.ParseUint(arg, 10, 64)
		if err == nil {
			return Offset(n), nil
		}
	case hasArg && kind == "timestamp":
		n, err := strconv.ParseInt(arg, 10, 64)
		if err == nil {
			return Timestamp(n), nil
		}
	}
	return OffsetSpec{}, fmt.Errorf("leanstream: offset spec %q: want first, last, next, offset:N or timestamp:MS", s)
}

// Subscribe subscribes to stream with the given id and initial credit
// (in chunks). handler gets every chunk on the reader goroutine; give
// credit back with Credit (normally one per chunk handled). With an
// Offset spec, the chunk's Messages skip records below the offset.
func (c *Client) Subscribe(subscriptionID uint8, stream string, offset OffsetSpec, credit uint16, handler ChunkHandler) error {
	if offset.kind < wire.OffsetTypeFirst || offset.kind > wire.OffsetTypeTimestamp {
		return fmt.Errorf("leanstream: subscribe to %q: invalid offset spec", stream)
	}
	if handler == nil {
		return fmt.Errorf("leanstream: subscribe to %q: nil handler", stream)
	}
	sub := &subscription{handler: handler}
	if offset.kind == wire.OffsetTypeOffset {
		sub.skipBelow = offset.value
	}
	c.mu.Lock()
	if _, ok := c.mu.subs[subscriptionID]; ok {
		c.mu.Unlock()
		return fmt.Errorf("leanstream: subscribe to %q: subscription id %d in use", stream, subscriptionID)
	}
	c.mu.subs[subscriptionID] = sub // before the request: Deliver may follow the response at once
	c.mu.Unlock()
	_, err := c.call(context.Background(), fmt.Sprintf("subscribe %d to %q", subscriptionID, stream), wire.KeySubscribe,
		func(b []byte) []byte {
			b = wire.AppendString(append(b, subscriptionID), stream)
			b = wire.AppendU16(b, offset.kind)
			if offset.kind == wire.OffsetTypeOffset || offset.kind == wire.OffsetTypeTimestamp {
				b = wire.AppendU64(b, offset.value)
			}
			return wire.AppendU16(b, credit)
		})
	if err != nil {
		c.mu.Lock()
		delete(c.mu.subs, subscriptionID)
		c.mu.Unlock()
	}
	return err
}

// Unsubscribe ends a subscription.
func (c *Client) Unsubscribe(subscriptionID uint8) error {
	_, err := c.call(context.Background(), fmt.Sprintf("unsubscribe %d", subscriptionID), wire.KeyUnsubscribe,
		func(b []byte) []byte { return append(b, subscriptionID) })
	c.mu.Lock()
	delete(c.mu.subs, subscriptionID)
	c.mu.Unlock()
	return err
}

// Credit gives a subscription n more chunks of credit. The server answers
// only on errors (Config.OnCreditError).
func (c *Client) Credit(subscriptionID uint8, n uint16) error {
	return c.writeFrame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, wire.KeyCredit, 1)
		b = wire.AppendU16(append(b, subscriptionID), n)
		return wire.EndFrame(b, start)
	})
}

// DeferCredit gives a subscription n more chunks of credit, as Credit
// does, but writes it only when the connection's reader next reads the
// socket, together with every other credit deferred until then (summed
// per subscription): a handler that gives one credit per chunk then costs
// one write per read of the socket instead of one per chunk, and the
// server reads them at once. The server gets the same credit, no later
// than before the reader could wait for more chunks. Meant for
// ChunkHandlers; from elsewhere, with no chunks coming, the credit waits.
func (c *Client) DeferCredit(subscriptionID uint8, n uint16) {
	if n == 0 {
		return
	}
	c.wmu.Lock()
	if c.credits[subscriptionID] == 0 {
		c.creditIDs = append(c.creditIDs, subscriptionID)
	}
	c.credits[subscriptionID] += uint32(n)
	c.creditsDeferred.Store(true)
	c.wmu.Unlock()
}

// maxCreditFrame is the most credit one Credit frame carries: servers
// read it as a signed 16-bit number.
const maxCreditFrame = math.MaxInt16

// writeDeferredCredits writes the credits DeferCredit gathered, with one
// write.
func (c *Client) writeDeferredCredits() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.creditsDeferred.Store(false)
	if len(c.creditIDs) == 0 {
		return nil
	}
	b := c.wbuf[:0]
	for _, id := range c.creditIDs {
		for n := c.credits[id]; n > 0; {
			k := min(n, maxCreditFrame)
			n -= k
			var start int
			b, start = wire.BeginFrame(b, wire.KeyCredit, 1)
			b = wire.AppendU16(append(b, id), uint16(k))
			b = wire.EndFrame(b, start)
		}
		c.credits[id] = 0
	}
	c.creditIDs = c.creditIDs[:0]
	c.wbuf = b
	if _, err := c.w.Write(b); err != nil {
		return fmt.Errorf("leanstream: write credit: %w", err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("leanstream: write credit: %w", err)
	}
	return nil
}

// creditWriter is the reader goroutine's view of the connection: before
// each read of the socket it writes the deferred credits.
type creditWriter struct{ c *Client }

func (cw creditWriter) Read(p []byte) (int, error) {
	if cw.c.creditsDeferred.Load() {
		if err := cw.c.writeDeferredCredits(); err != nil {
			return 0, err
		}
	}
	return cw.c.conn.Read(p)
}

// handleDeliver reads Deliver v1: subscription id, chunk.
func (c *Client) handleDeliver(d *decoder) error {
	id := d.u8("deliver")
	if d.err != nil {
		return d.err
	}
	ch, err := ParseChunk(d.b, c.cfg.CheckCRC)
	if err != nil {
		return fmt.Errorf("leanstream: deliver to subscription %d: %w", id, err)
	}
	c.mu.Lock()
	sub := c.mu.subs[id]
	c.mu.Unlock()
	if sub == nil {
		return nil // unsubscribed meanwhile
	}
	ch.SubscriptionID = id
	ch.skipBelow = sub.skipBelow
	c.chunk = ch // reused, so that the handler's pointer does not allocate
	sub.handler(&c.chunk)
	c.chunk = Chunk{}
	return nil
}
