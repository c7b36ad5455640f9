package amqp

import (
	"encoding/binary"
	"errors"

	"github.com/warren-mq/warren/osiris"
)

// publishStreams appends a message routed to streams, converted to AMQP
// 1.0 (stream_convert.go), to each as one simple entry with the
// message's filter value, as rabbit_stream_queue:deliver does. done
// completes once per stream, when its writer has written the chunk:
// streams confirm after the write, without fsync, as RabbitMQ's do.
func publishStreams(streams []*osiris.Stream, exchange, key string, props, body []byte, done *pubConfirm) {
	if len(streams) == 0 {
		return
	}
	// A simple entry: u32 size (top bit clear), then the message.
	entry := make([]byte, 4, 4+256+len(props)+len(body))
	entry, filter, err := appendStreamMessage(entry, exchange, key, props, body)
	if err == nil && len(entry)-4 > 1<<31-1 {
		err = errEntryTooLarge
	}
	if err != nil {
		for range streams {
			done.complete(err)
		}
		return
	}
	binary.BigEndian.PutUint32(entry, uint32(len(entry)-4))
	for _, s := range streams {
		b := &osiris.Batch{
			Messages: []osiris.Message{{Entry: entry, Filter: filter}},
			Done:     func(r osiris.Result) { done.complete(r.Err) },
		}
		if err := s.Submit(b); err != nil {
			done.complete(err) // closed or deleted meanwhile
		}
	}
}

// errEntryTooLarge is a message whose AMQP 1.0 encoding does not fit a
// simple entry's 31-bit size.
var errEntryTooLarge = errors.New("amqp: message too large for a stream entry")
