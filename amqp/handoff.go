package amqp

import (
	"net"

	"github.com/warren-mq/warren/internal/netserve"
)

// Handoff takes over a connection on the AMQP port whose 8-byte protocol
// header is AMQP 1.0's, as RabbitMQ 4.x's reader turns into its AMQP 1.0
// reader: nc is the socket (after TLS on a TLS listener), header the
// bytes read, buffered what was read past them. It returns the
// connection to run: the server calls its Serve on the connection's
// goroutine and, when the server closes, its Shutdown. The handshake
// timeout is the new connection's to apply. listenerConns returns how
// many connections the accepting listener has open, this one included
// (for connection_max, which counts both protocols as RabbitMQ's ranch
// listener does); it is nil for a connection no listener counts.
// Package amqp does not import the AMQP 1.0 front end; the daemon wires
// it in.
type Handoff func(nc net.Conn, header [8]byte, buffered []byte, listenerConns func() int64) netserve.Conn

// handedOffConn holds the connection a Handoff returned.
type handedOffConn struct{ netserve.Conn }

// isAMQP10Header reports whether hdr is "AMQP" id 1 0 0: SASL (3), TLS
// (2) or bare AMQP (0), which the AMQP 1.0 front end answers.
func isAMQP10Header(hdr [8]byte) bool {
	return string(hdr[:4]) == "AMQP" && hdr[5] == 1 && hdr[6] == 0 && hdr[7] == 0
}

// handOff gives the connection to the AMQP 1.0 front end; the reader
// stops here and Serve runs the new connection once the 0-9-1 writer has
// stopped (it never wrote: nothing was sent yet).
func (c *conn) handOff(hdr [8]byte) error {
	buffered := append([]byte(nil), c.fr.Buffered()...)
	var active func() int64
	if c.listenerConns != nil {
		active = c.listenerConns.Load
	}
	h := c.srv.cfg.AMQP10(c.nc, hdr, buffered, active)
	c.handedOff.Store(&handedOffConn{h})
	return errClosed
}
