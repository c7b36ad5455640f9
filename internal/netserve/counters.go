package netserve

import (
	"io"
	"sync/atomic"
)

// Counters are a connection's socket counters, as RabbitMQ reports them
// (recv_oct, recv_cnt, send_oct, send_cnt): bytes, and the reads and
// writes that moved bytes. Each is added to by the one goroutine that owns
// that side of the socket, once per system call rather than per frame,
// and read by any goroutine.
type Counters struct {
	RecvOct, RecvCnt atomic.Uint64
	SendOct, SendCnt atomic.Uint64
}

// Reader returns r counting what it reads into c.
func (c *Counters) Reader(r io.Reader) io.Reader { return countingReader{r, c} }

// Sent counts one write of n bytes; n <= 0, or a nil c, counts nothing.
func (c *Counters) Sent(n int64) {
	if c != nil && n > 0 {
		c.SendOct.Add(uint64(n))
		c.SendCnt.Add(1)
	}
}

type countingReader struct {
	r io.Reader
	c *Counters
}

func (cr countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	if n > 0 {
		cr.c.RecvOct.Add(uint64(n))
		cr.c.RecvCnt.Add(1)
	}
	return n, err
}
