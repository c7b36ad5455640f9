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

// Stream replication over nodenet (docs/design-cluster.md, "Streams";
// a quorum queue's log replicates the same way, "Quorum queues"):
// each replica of a stream on this node dials the stream's leader on
// nodenet's stream lane, names the stream, and runs osiris.Follow on the
// connection; the leader's side runs osiris.ServeReplica. A connection
// that ends is dialed again after a pause, for as long as the stream is
// open here.

// streamHello names the stream a connection is for and what for:
//
//	version u8 (1) | purpose u8 | vhost length u16 | vhost | name length u16 | name
//
// purposeFollow: a replica's pull (osiris's protocol follows);
// purposeTail: the coordinator asks for the member's log end, answered
// with last epoch u64 | next offset u64 | 0 or 1 (u8: the stream is open);
// purposeJoin: the dialer asks to be added to the catalog's group (empty
// vhost and name), answered 1 (u8) once it is, 0 if not (join.go).
// purposeStoreOffset: a node whose copy
// is a replica stores a consumer's offset in the leader's, followed by
//
//	reference length u16 | reference | offset u64
//
// and answered with 1 (stored) or 0 (u8).
const (
	streamHelloVersion = 1
	purposeFollow      = 1
	purposeTail        = 2
	purposeJoin        = 3
	purposeStoreOffset = 4
)

func appendStreamHello(dst []byte, purpose byte, vhost, name string) []byte {
	dst = append(dst, streamHelloVersion, purpose)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(vhost)))
	dst = append(dst, vhost...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	return append(dst, name...)
}

// readStreamHello reads what appendStreamHello wrote.
func readStreamHello(r io.Reader) (purpose byte, vhost, name string, err error) {
	var v [2]byte
	if _, err := io.ReadFull(r, v[:]); err != nil {
		return 0, "", "", err
	}
	if v[0] != streamHelloVersion {
		return 0, "", "", fmt.Errorf("cluster: stream hello version %d", v[0])
	}
	purpose = v[1]
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
		return 0, "", "", err
	}
	name, err = str()
	return purpose, vhost, name, err
}

// startStreams serves the leaders' side and follows every replicated
// stream open here as a replica, now and as they are created.
func (n *Node) startStreams(ctx context.Context) {
	b := n.cfg.Broker
	n.net.HandleConn(nodenet.LaneStream, func(from string, conn net.Conn) { n.serveReplica(ctx, from, conn) })
	b.SetOffsetForwarder(n.storeOffsetAt)
	n.stopWatch = b.WatchStreams(func(vhost, name string) { n.streamOpened(ctx, vhost, name) })
	for _, def := range b.PlacedHere() {
		n.streamOpened(ctx, def.VHost, def.Name)
	}
}

func (n *Node) serveReplica(ctx context.Context, from string, conn net.Conn) {
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	purpose, vhost, name, err := readStreamHello(conn)
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		n.log.Warn("cluster: bad stream replica hello", "from", from, "err", err)
		conn.Close()
		return
	}
	if purpose == purposeJoin {
		defer conn.Close()
		n.serveJoin(ctx, from, conn)
		return
	}
	s, err := n.cfg.Broker.ReplicatedLog(vhost, name)
	if purpose == purposeTail {
		defer conn.Close()
		var out [17]byte
		if err == nil {
			if h, herr := s.EpochHistory(); herr == nil {
				binary.BigEndian.PutUint64(out[0:], h.LastEpoch())
				binary.BigEndian.PutUint64(out[8:], h.Next)
				out[16] = 1
			}
		}
		conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		conn.Write(out[:])
		return
	}
	if purpose == purposeStoreOffset {
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		ref, offset, rerr := readStoreOffset(conn)
		stored := byte(0)
		if err == nil && rerr == nil && s.StoreOffset(ref, offset) == nil {
			stored = 1
		}
		conn.Write([]byte{stored})
		return
	}
	if err != nil || purpose != purposeFollow {
		conn.Close()
		return
	}
	err = osiris.ServeReplica(ctx, s, conn) // closes conn
	if err != nil && !errors.Is(err, context.Canceled) {
		n.log.Debug("cluster: stream replica served", "vhost", vhost, "stream", name, "replica", from, "err", err)
	}
}

// appendStoreOffset appends a purposeStoreOffset request's body (after
// its hello).
func appendStoreOffset(dst []byte, ref string, offset uint64) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(ref)))
	dst = append(dst, ref...)
	return binary.BigEndian.AppendUint64(dst, offset)
}

// readStoreOffset reads what appendStoreOffset wrote.
func readStoreOffset(r io.Reader) (ref string, offset uint64, err error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return "", 0, err
	}
	b := make([]byte, int(binary.BigEndian.Uint16(l[:]))+8)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", 0, err
	}
	n := len(b) - 8
	return string(b[:n]), binary.BigEndian.Uint64(b[n:]), nil
}

// storeOffsetAt stores ref's offset in stream name's copy on leader
// (queues.Broker.StoreStreamOffset, for a consumer connected to a
// replica).
func (n *Node) storeOffsetAt(leader, vhost, name, ref string, offset uint64) error {
	if leader == n.cfg.Name {
		return fmt.Errorf("cluster: store offset in %q: %w", name, osiris.ErrNotLeader)
	}
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
	defer cancel()
	conn, err := n.net.Dial(ctx, leader, nodenet.LaneStream)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	req := appendStoreOffset(appendStreamHello(nil, purposeStoreOffset, vhost, name), ref, offset)
	if _, err := conn.Write(req); err != nil {
		return err
	}
	var stored [1]byte
	if _, err := io.ReadFull(conn, stored[:]); err != nil {
		return err
	}
	if stored[0] != 1 {
		return fmt.Errorf("cluster: store offset in %q: refused by %s", name, leader)
	}
	return nil
}

// streamOpened starts following the stream if this node is a replica.
func (n *Node) streamOpened(ctx context.Context, vhost, name string) {
	def, ok := n.cfg.Broker.PlacementOf(vhost, name)
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
func (n *Node) follow(ctx context.Context, def queues.Placement) {
	wait := 50 * time.Millisecond
	for ctx.Err() == nil {
		s, err := n.cfg.Broker.ReplicatedLog(def.VHost, def.Name)
		if err != nil {
			return // deleted
		}
		if cur, ok := n.cfg.Broker.PlacementOf(def.VHost, def.Name); !ok || cur.Leader != def.Leader || cur.Epoch != def.Epoch {
			return
		}
		conn, err := n.net.Dial(ctx, def.Leader, nodenet.LaneStream)
		if err == nil {
			if _, err = conn.Write(appendStreamHello(nil, purposeFollow, def.VHost, def.Name)); err == nil {
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

// memberTail is a member's log end as the coordinator learns it.
type memberTail struct {
	node        string
	epoch, next uint64
}

// tail asks member for its copy's log end (this node answers itself).
func (n *Node) tail(ctx context.Context, def queues.Placement, member string) (memberTail, bool) {
	if member == n.cfg.Name {
		s, err := n.cfg.Broker.ReplicatedLog(def.VHost, def.Name)
		if err != nil {
			return memberTail{}, false
		}
		h, err := s.EpochHistory()
		if err != nil {
			return memberTail{}, false
		}
		return memberTail{member, h.LastEpoch(), h.Next}, true
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := n.net.Dial(ctx, member, nodenet.LaneStream)
	if err != nil {
		return memberTail{}, false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write(appendStreamHello(nil, purposeTail, def.VHost, def.Name)); err != nil {
		return memberTail{}, false
	}
	var in [17]byte
	if _, err := io.ReadFull(conn, in[:]); err != nil || in[16] != 1 {
		return memberTail{}, false
	}
	return memberTail{member, binary.BigEndian.Uint64(in[0:]), binary.BigEndian.Uint64(in[8:])}, true
}

// leaderLostAfter is how long a stream's leader's node is unreachable
// before the coordinator moves the leadership: on top of nodenet's 2 s of
// silence before it reports a peer unreachable, so a leader is moved
// about 3.5 s after its node stops.
const leaderLostAfter = time.Second

// answersNeeded is how many of a stream's members (the lost leader
// not among them) must tell their log end before a new leader is
// chosen among them: enough that every majority of the members, which
// holds each committed chunk, includes one of them (n - (n/2+1) + 1).
// For three members that is two; for two, the one left, which holds
// every committed chunk since a chunk of two members commits on both.
func answersNeeded(members int) int { return members - members/2 }

// coordinate runs on every node and acts on the one that leads the
// catalog group: a replicated stream or quorum queue whose leader's node has been
// unreachable for leaderLostAfter gets a new leader, the member with the
// longest log among the members that answer, when enough answer that
// one of them holds every committed chunk (answersNeeded), at the next
// epoch. Only members answer and only members are chosen.
func (n *Node) coordinate(ctx context.Context) {
	defer n.wg.Done()
	down := map[string]time.Time{} // stream key -> leader first seen down
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if n.host.Leader(CatalogGroup) != n.ids[n.cfg.Name] {
			clear(down)
			continue
		}
		b := n.cfg.Broker
		for _, def := range b.Placements() {
			key := def.VHost + "\x00" + def.Name
			if b.NodeUp(def.Leader) {
				delete(down, key)
				continue
			}
			since, seen := down[key]
			if !seen {
				down[key] = time.Now()
				continue
			}
			if time.Since(since) < leaderLostAfter {
				continue
			}
			var tails []memberTail
			for _, m := range def.Members {
				if m != def.Leader && b.NodeUp(m) {
					if t, ok := n.tail(ctx, def, m); ok {
						tails = append(tails, t)
					}
				}
			}
			if len(tails) < answersNeeded(len(def.Members)+def.Lost) { // a forgotten member never answers
				continue // too few answers: a choice could lose committed chunks
			}
			best := tails[0]
			for _, t := range tails[1:] {
				if t.epoch > best.epoch || t.epoch == best.epoch && (t.next > best.next || t.next == best.next && t.node < best.node) {
					best = t
				}
			}
			n.log.Warn("cluster: leader lost; moving it", "vhost", def.VHost, "name", def.Name, "queue", def.Queue,
				"from", def.Leader, "to", best.node, "epoch", def.Epoch+1)
			if err := b.MoveLeader(def, best.node, def.Epoch+1); err != nil {
				n.log.Warn("cluster: leader not moved", "vhost", def.VHost, "name", def.Name, "queue", def.Queue, "err", err)
				continue
			}
			delete(down, key)
		}
	}
}
