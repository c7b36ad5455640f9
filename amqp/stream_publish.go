package amqp

// streamMessage is a message being published, as queues.Publish asks a
// stream destination's format of it: converted to AMQP 1.0
// (stream_convert.go).
type streamMessage struct {
	exchange, key string
	props, body   []byte
}

// AppendStreamMessage implements queues.StreamEncoder.
func (m *streamMessage) AppendStreamMessage(dst []byte) ([]byte, []byte, error) {
	return appendStreamMessage(dst, m.exchange, m.key, m.props, m.body)
}
