package netserve

import (
	"net"
	"sync"
)

// Merge returns a listener that accepts on every one of lns, for a server
// that serves one Serve call on several listeners (the management API on
// HTTP and HTTPS). Addr is the first listener's; Close closes them all.
// An error from any listener's Accept is returned by Accept.
func Merge(lns ...net.Listener) net.Listener {
	if len(lns) == 1 {
		return lns[0]
	}
	m := &merged{lns: lns, accepted: make(chan acceptResult), done: make(chan struct{})}
	for _, ln := range lns {
		go m.acceptLoop(ln)
	}
	return m
}

type acceptResult struct {
	c   net.Conn
	err error
}

type merged struct {
	lns       []net.Listener
	accepted  chan acceptResult
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

func (m *merged) acceptLoop(ln net.Listener) {
	for {
		c, err := ln.Accept()
		select {
		case m.accepted <- acceptResult{c, err}:
		case <-m.done:
			if c != nil {
				c.Close()
			}
			return
		}
		if err != nil {
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				return
			}
		}
	}
}

func (m *merged) Accept() (net.Conn, error) {
	select {
	case r := <-m.accepted:
		return r.c, r.err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *merged) Close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.done)
		for _, ln := range m.lns {
			if e := ln.Close(); e != nil && err == nil {
				err = e
			}
		}
	})
	return err
}

func (m *merged) Addr() net.Addr { return m.lns[0].Addr() }
