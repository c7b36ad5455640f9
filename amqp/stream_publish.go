package amqp

import (
	"github.com/warren-mq/warren/internal/msgconv"
	"github.com/warren-mq/warren/queues"
)

// streamMessage is a message being published, as queues.Publish asks a
// stream destination's format of it: converted to AMQP 1.0
// (internal/msgconv).
type streamMessage struct {
	exchange, key string
	props, body   []byte
}

// StreamMessage returns the stream form of an AMQP 0-9-1 message
// published to exchange with routing key key, for publishers other than
// a channel (the management API's publish).
func StreamMessage(exchange, key string, props, body []byte) queues.StreamEncoder {
	return &streamMessage{exchange: exchange, key: key, props: props, body: body}
}

// AppendStreamMessage implements queues.StreamEncoder.
func (m *streamMessage) AppendStreamMessage(dst []byte) ([]byte, []byte, error) {
	return msgconv.AppendAMQP10(dst, m.exchange, m.key, m.props, m.body)
}
