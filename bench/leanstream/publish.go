package leanstream

import (
	"context"
	"fmt"

	"github.com/warren-mq/warren/streamproto/wire"
)

// publishHeaderSize is size, key, version, publisher id and count.
const publishHeaderSize = 4 + 2 + 2 + 1 + 4

// DeclarePublisher declares publisher id on stream. A non-empty reference
// turns on deduplication (publishing ids must then increase).
func (c *Client) DeclarePublisher(id uint8, reference, stream string) error {
	_, err := c.call(context.Background(), fmt.Sprintf("declare publisher %d on %q", id, stream), wire.KeyDeclarePublisher,
		func(b []byte) []byte {
			return wire.AppendString(wire.AppendString(append(b, id), reference), stream)
		})
	return err
}

// DeletePublisher deletes publisher id.
func (c *Client) DeletePublisher(id uint8) error {
	_, err := c.call(context.Background(), fmt.Sprintf("delete publisher %d", id), wire.KeyDeletePublisher,
		func(b []byte) []byte { return append(b, id) })
	return err
}

// Publish writes the batch as one Publish frame (version 1) and flushes
// it. Confirms and errors arrive later through Config.OnConfirm and
// Config.OnPublishError. The batch may be reset and reused on return.
func (c *Client) Publish(publisherID uint8, batch *Batch) error {
	if batch.n == 0 {
		return nil
	}
	size := publishHeaderSize - 4 + len(batch.buf)
	if fm := c.frameMax.Load(); fm != 0 && uint64(size)+4 > uint64(fm) {
		return fmt.Errorf("leanstream: publish %d messages: frame of %d bytes exceeds frame max %d", batch.n, size+4, fm)
	}
	var hdr [publishHeaderSize]byte
	b, start := wire.BeginFrame(hdr[:0], wire.KeyPublish, 1)
	b = append(b, publisherID)
	b = wire.AppendU32(b, uint32(batch.n))
	putU32(b[start:], uint32(size))

	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(b); err != nil {
		return fmt.Errorf("leanstream: publish: %w", err)
	}
	if _, err := c.w.Write(batch.buf); err != nil {
		return fmt.Errorf("leanstream: publish: %w", err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("leanstream: publish: %w", err)
	}
	return nil
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

// handleConfirm reads PublishConfirm: publisher id, [u64] ids.
func (c *Client) handleConfirm(d *decoder) error {
	pub := d.u8("publish confirm")
	n := int32(d.u32("publish confirm"))
	if d.err != nil {
		return d.err
	}
	if n < 0 || int64(n)*8 > int64(len(d.b)) {
		return fmt.Errorf("leanstream: publish confirm: %d ids in %d bytes", n, len(d.b))
	}
	ids := c.confirmIDs[:0]
	for range n {
		ids = append(ids, d.u64("publish confirm"))
	}
	c.confirmIDs = ids
	if c.cfg.OnConfirm != nil {
		c.cfg.OnConfirm(pub, ids)
	}
	return nil
}

// handlePublishError reads PublishError: publisher id, count, (u64 id,
// u16 code)*.
func (c *Client) handlePublishError(d *decoder) error {
	pub := d.u8("publish error")
	n := int32(d.u32("publish error"))
	if d.err != nil {
		return d.err
	}
	if n < 0 || int64(n)*10 > int64(len(d.b)) {
		return fmt.Errorf("leanstream: publish error: %d entries in %d bytes", n, len(d.b))
	}
	errs := c.publishErrs[:0]
	for range n {
		id := d.u64("publish error")
		errs = append(errs, PublishError{PublishingID: id, Code: wire.Code(d.u16("publish error"))})
	}
	c.publishErrs = errs
	if c.cfg.OnPublishError != nil {
		c.cfg.OnPublishError(pub, errs)
	}
	return nil
}
