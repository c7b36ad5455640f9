// Package nodenet is the node-to-node transport of a Warren cluster:
// TCP between the nodes named in a fixed peer map, with a handshake that
// checks the cluster name, both node names and a shared secret, and
// framed messages on typed lanes. It imports nothing of Warren's.
//
// # Links and connections
//
// Each pair of nodes keeps one link, a TCP connection that the node
// whose name sorts lower dials and redials (with a backoff doubling from
// Config.RedialMin to Config.RedialMax) whenever it drops; the other
// node accepts it, and a newer link from the same peer replaces an older
// one. Send queues a frame on a peer's link; Handle sets the handler
// that receives a lane's frames. Send never waits for the network: each
// peer has a bounded queue, and a frame that does not fit is dropped and
// counted (raft tolerates loss). Lanes that need flow control instead,
// such as a stream replica's pull, open a connection of their own with
// Dial, which a lane's ConnHandler on the peer accepts; either node of a
// pair may dial one.
//
// Every byte received, heartbeats included, marks its peer heard (a
// large frame keeps its peer reachable while it arrives). A link writes
// a heartbeat every Config.HeartbeatInterval in which it wrote nothing
// else. A peer not heard from for Config.Timeout (2 s by default) is
// reported through Config.OnUnreachable and its link is closed; Config.OnReachable reports a link coming up to a peer that was
// unreachable (or new). Frames queued for an unreachable peer are
// dropped: raft, told the peer is unreachable, sends afresh.
//
// # Handshake
//
// Both sides start with a preamble, then exchange handshake messages,
// strictly in turn:
//
//	dialer                                  acceptor
//	"WRNN" version hello(nonce d)     ->
//	                                  <-    "WRNN" version hello(nonce a) | refuse
//	proof(dialer)                     ->
//	                                  <-    proof(acceptor) | refuse
//
// A proof is HMAC-SHA256 keyed with the shared secret over a label that
// differs by side, the cluster name, both node names, the purpose and
// lane, and both nonces; the secret itself never crosses the wire. The
// dialer proves first, so a node that merely connects learns nothing it
// could test guesses of the secret against. An acceptor refuses, with a
// refuse message naming the reason, a dialer of another cluster, one
// not in its peer map, one that meant another node, a link dialed by the
// higher-named node, a connection for a lane it has no ConnHandler for,
// a node it was told to forget (Net.Forget: removed from the cluster for
// good, refused with ReasonForgotten so that the node logs why), and a
// bad proof; a dialer checks the same of the acceptor's hello and
// proof. Both sides log the reason; Dial returns it as an error that
// errors.Is classifies (ErrWrongCluster, ErrUnknownNode, ErrBadSecret,
// ErrVersion, ...). A preamble with another version is answered with
// this side's preamble and a close; one without the magic is closed
// without an answer.
//
// # Wire format
//
// After the preamble everything is a frame. Version 1:
//
//	preamble:  +------+----+
//	           | WRNN | u8 |  magic, version
//	           +------+----+
//	frame:     +-------------+---------+---------+
//	           | u32 length  | u8 lane | payload |  length: payload bytes, big endian
//	           +-------------+---------+---------+
//	lane 0x00:        heartbeat, empty payload
//	lane 0x01..0xEF:  a caller's lane (LaneRaft, LaneStream, LaneProxy, ...)
//	0xF0 hello:   str8 cluster, str8 from, str8 to, u8 purpose (0 link, 1 lane
//	              connection), u8 lane, 32B nonce
//	0xF1 proof:   32B HMAC-SHA256
//	0xF2 refuse:  u8 reason, str8 text
//
// str8 is a u8 length and that many bytes. Handshake payloads are at
// most 1 KiB; frame payloads at most Config.MaxPayload (both nodes must
// agree). After the handshake a lane connection (Dial) carries whatever
// its lane speaks; nodenet writes nothing more on it.
//
// # Concurrency
//
// Each link has a reader goroutine, which calls the lane handlers in
// order, and a writer goroutine, which takes batches from the peer's
// queue and writes them with one writev. A replacing link starts only
// after the old link's goroutines have returned, so frames are never
// reordered. A watchdog goroutine checks silence, one goroutine per
// higher-named peer dials, one accepts, and one calls the reachability
// callbacks in order. Locks: Net.mu, then peer.mu, then the queues'
// own; none is held across I/O or a callback.
package nodenet
