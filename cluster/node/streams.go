package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/warren-mq/warren/cluster/nodenet"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
)

// Stream replication over nodenet (docs/design-cluster.md, "Streams"):
// each replica of a stream on this node dials the stream's leader on
// nodenet's stream lane, names the stream, and runs osiris.Follow on the
// connection; the leader's side runs osiris.ServeReplica. A connection
// that ends is dialed again after a pause, for as long as the stream is
// open here.

// streamHello names the stream a replica connection is for:
//
//	version u8 (1) | vhost length u16 | vhost | name length u16 | name
const streamHelloVersion = 1

func appendStreamHello(dst []byte, vhost, name string) []byte {
	dst = append(dst, streamHelloVersion)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(vhost)))
	dst = append(dst, vhost...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	return append(dst, name...)
}

// readStreamHello reads what appendStreamHello wrote.
func readStreamHello(r io.Reader) (vhost, name string, err error) {
	var v [1]byte
	if _, err := io.ReadFull(r, v[:]); err != nil {
		return "", "", err
	}
	if v[0] != streamHelloVersion {
		return "", "", fmt.Errorf("cluster: stream hello version %d", v[0])
	}
	str := func() (string, error) {
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return "", err
		}
		b := make([]byte, binary.BigEndian.Uint16(l[:]))
		_, err := io.ReadFull(r, b)
		return string(b), err
	}
	if vhost, err = str(); err != nil {
		return "", "", err
	}
	name, err = str()
	return vhost, name, err
}

// startStreams serves the leaders' side and follows every replicated
// stream open here as a replica, now and as they are created.
func (n *Node) startStreams(ctx context.Context) {
	b := n.cfg.Broker
	n.net.HandleConn(nodenet.LaneStream, func(from string, conn net.Conn) { n.serveReplica(ctx, from, conn) })
	n.stopWatch = b.WatchStreams(func(vhost, name string) { n.streamOpened(ctx, vhost, name) })
	for _, def := range b.StreamsHere() {
		n.streamOpened(ctx, def.VHost, def.Name)
	}
}

func (n *Node) serveReplica(ctx context.Context, from string, conn net.Conn) {
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	vhost, name, err := readStreamHello(conn)
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		n.log.Warn("cluster: bad stream replica hello", "from", from, "err", err)
		conn.Close()
		return
	}
	s, err := n.cfg.Broker.Stream(vhost, name)
	if err != nil {
		conn.Close()
		return
	}
	err = osiris.ServeReplica(ctx, s, conn)
	if err != nil && !errors.Is(err, context.Canceled) {
		n.log.Debug("cluster: stream replica served", "vhost", vhost, "stream", name, "replica", from, "err", err)
	}
}

// streamOpened starts following the stream if this node is a replica.
func (n *Node) streamOpened(ctx context.Context, vhost, name string) {
	def, ok := n.cfg.Broker.StreamPlacement(vhost, name)
	if !ok || def.Leader == n.cfg.Name {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.follow(ctx, def)
	}()
}

// follow runs the replica's pull from the leader until the stream is
// no longer open here or the node closes.
func (n *Node) follow(ctx context.Context, def queues.StreamDef) {
	wait := 50 * time.Millisecond
	for ctx.Err() == nil {
		s, err := n.cfg.Broker.Stream(def.VHost, def.Name)
		if err != nil {
			return // deleted
		}
		if cur, ok := n.cfg.Broker.StreamPlacement(def.VHost, def.Name); !ok || cur.Leader != def.Leader || cur.Epoch != def.Epoch {
			return
		}
		conn, err := n.net.Dial(ctx, def.Leader, nodenet.LaneStream)
		if err == nil {
			if _, err = conn.Write(appendStreamHello(nil, def.VHost, def.Name)); err == nil {
				err = osiris.Follow(ctx, s, conn)
				wait = 50 * time.Millisecond
			} else {
				conn.Close()
			}
		}
		if ctx.Err() != nil {
			return
		}
		n.log.Debug("cluster: stream replica reconnecting", "vhost", def.VHost, "stream", def.Name, "leader", def.Leader, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Advertise records where this node's stream listener is, for the
// stream protocol's Metadata on every node; it retries in the background
// until the cluster applies it.
func (n *Node) Advertise(host string, port int) {
	a := queues.NodeAddr{Node: n.cfg.Name, Host: host, Port: port}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for n.ctx.Err() == nil {
			err := n.cfg.Broker.Advertise(a)
			if err == nil {
				return
			}
			select {
			case <-n.ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}
