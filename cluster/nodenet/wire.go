package nodenet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Lane says which handler a frame is for. Lanes 1 to MaxLane are for
// callers; 0 carries heartbeats; 0xF0 and up are handshake messages.
type Lane uint8

// These constants are part of the wire format and must not be changed;
// a change needs a new Version.
const (
	// Version is the protocol version in the preamble. Nodes speaking
	// different versions refuse each other.
	Version = 1

	// LaneControl carries heartbeats: an empty payload. Never a caller's.
	LaneControl = Lane(0) // empty payload
	// LaneRaft carries batches of raft messages for the raft host.
	LaneRaft = Lane(1) // payload: the raft host's encoding
	// LaneStream is stream replication: a replica's pull runs over a
	// connection of its own (Dial and HandleConn).
	LaneStream = Lane(2) // Dial'd byte stream; osiris's protocol
	// LaneProxy carries a client connection's traffic to the node that
	// owns its queue.
	LaneProxy = Lane(3) // payload: the proxy's encoding
	// MaxLane is the highest lane a caller may use.
	MaxLane = Lane(0xEF)

	msgHello  = Lane(0xF0) // str8 cluster + str8 from + str8 to + u8 purpose + u8 lane + 32B nonce
	msgProof  = Lane(0xF1) // 32B HMAC-SHA256
	msgRefuse = Lane(0xF2) // u8 Reason + str8 text

	frameHeaderLen      = 5    // u32 payload length + u8 lane
	preambleLen         = 5    // magic + u8 version
	nonceLen            = 32   // random bytes per side per handshake
	macLen              = 32   // HMAC-SHA256
	maxHandshakePayload = 1024 // bound on a handshake message's payload

	purposeLink = 0 // the pair's one connection for Send and heartbeats
	purposeConn = 1 // a dedicated connection for a lane (Dial)
)

// magic starts every connection, in both directions.
var magic = [4]byte{'W', 'R', 'N', 'N'}

// Handshake message types sit above every lane.
const _ = uint(msgHello - MaxLane - 1)

// Reason says why a node refused a handshake. These values are part of
// the wire format.
type Reason uint8

// Reasons for a refusal.
const (
	ReasonMalformed      = Reason(1) // a handshake message did not parse
	ReasonWrongCluster   = Reason(2) // the cluster names differ
	ReasonUnknownNode    = Reason(3) // the dialer is not in the acceptor's peer map
	ReasonWrongNode      = Reason(4) // the dialer meant another node than the acceptor
	ReasonBadSecret      = Reason(5) // the proof of the shared secret was wrong
	ReasonWrongDirection = Reason(6) // a link dialed by the node whose name sorts higher
	ReasonNoHandler      = Reason(7) // no HandleConn handler for the lane asked for
	ReasonClosing        = Reason(8) // the acceptor is shutting down
	ReasonForgotten      = Reason(9) // the dialer was removed from the cluster (Net.Forget)
)

func (r Reason) String() string {
	switch r {
	case ReasonMalformed:
		return "malformed handshake"
	case ReasonWrongCluster:
		return "wrong cluster"
	case ReasonUnknownNode:
		return "unknown node"
	case ReasonWrongNode:
		return "wrong node"
	case ReasonBadSecret:
		return "bad secret"
	case ReasonWrongDirection:
		return "wrong direction"
	case ReasonNoHandler:
		return "no handler for lane"
	case ReasonClosing:
		return "closing"
	case ReasonForgotten:
		return "forgotten"
	}
	return fmt.Sprintf("reason %d", uint8(r))
}

// err returns the sentinel that classifies r.
func (r Reason) err() error {
	switch r {
	case ReasonMalformed:
		return ErrMalformed
	case ReasonWrongCluster:
		return ErrWrongCluster
	case ReasonUnknownNode:
		return ErrUnknownNode
	case ReasonWrongNode:
		return ErrWrongNode
	case ReasonBadSecret:
		return ErrBadSecret
	case ReasonForgotten:
		return ErrForgotten
	}
	return ErrRefused
}

// Errors. Handshake failures wrap one of the first group; callers
// classify with errors.Is.
var (
	ErrBadMagic     = errors.New("nodenet: bad magic (not a Warren node)")
	ErrVersion      = errors.New("nodenet: protocol version mismatch")
	ErrMalformed    = errors.New("nodenet: malformed message")
	ErrWrongCluster = errors.New("nodenet: wrong cluster")
	ErrUnknownNode  = errors.New("nodenet: unknown node")
	ErrWrongNode    = errors.New("nodenet: wrong node")
	ErrBadSecret    = errors.New("nodenet: bad secret")
	ErrRefused      = errors.New("nodenet: refused")
	// ErrForgotten is a peer this node forgot (Net.Forget), or, from a
	// handshake, this node as its peer has forgotten it.
	ErrForgotten = errors.New("nodenet: node forgotten by the cluster")

	ErrFrameTooLarge = errors.New("nodenet: frame too large")
	ErrQueueFull     = errors.New("nodenet: send queue full")
	ErrUnknownPeer   = errors.New("nodenet: unknown peer")
	ErrInvalidLane   = errors.New("nodenet: invalid lane")
	ErrClosed        = errors.New("nodenet: closed")
	ErrInvalidConfig = errors.New("nodenet: invalid config")
)

// appendPreamble appends the magic and the version.
func appendPreamble(dst []byte, version uint8) []byte {
	dst = append(dst, magic[:]...)
	return append(dst, version)
}

// parsePreamble checks b (preambleLen bytes) and returns the version in
// it, which the caller compares with its own.
func parsePreamble(b []byte) (uint8, error) {
	if len(b) != preambleLen || [4]byte(b[:4]) != magic {
		return 0, fmt.Errorf("%w: % x", ErrBadMagic, b)
	}
	return b[4], nil
}

// appendFrameHeader appends a frame header for a payload of n bytes.
func appendFrameHeader(dst []byte, lane Lane, n int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	return append(dst, byte(lane))
}

// parseFrameHeader returns the lane and payload length in a frame
// header (frameHeaderLen bytes), refusing a length over maxPayload.
func parseFrameHeader(h []byte, maxPayload int) (Lane, int, error) {
	n := binary.BigEndian.Uint32(h)
	if uint64(n) > uint64(maxPayload) {
		return 0, 0, fmt.Errorf("%w: %d bytes on lane %d, at most %d", ErrFrameTooLarge, n, h[4], maxPayload)
	}
	return Lane(h[4]), int(n), nil
}

// readFrame reads one frame from r with a payload of at most
// maxPayload bytes, into a new slice. hdr is scratch space for the
// header (a caller reading many frames keeps one, so that the header
// does not escape per frame); nil allocates one.
func readFrame(r io.Reader, hdr *[frameHeaderLen]byte, maxPayload int) (Lane, []byte, error) {
	if hdr == nil {
		hdr = new([frameHeaderLen]byte)
	}
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	lane, n, err := parseFrameHeader(hdr[:], maxPayload)
	if err != nil {
		return 0, nil, err
	}
	if n == 0 {
		return lane, nil, nil
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, noEOF(err)
	}
	return lane, buf, nil
}

// noEOF turns a clean EOF in the middle of something into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// hello is the first handshake message each side sends.
type hello struct {
	cluster string
	from    string // the sender's node name
	to      string // the node the sender means to talk to
	purpose uint8  // purposeLink or purposeConn
	lane    Lane   // for purposeConn: the lane whose handler takes the connection
	nonce   [nonceLen]byte
}

// appendTo appends h as a whole frame.
func (h *hello) appendTo(dst []byte) []byte {
	n := 3 + len(h.cluster) + len(h.from) + len(h.to) + 2 + nonceLen
	dst = appendFrameHeader(dst, msgHello, n)
	dst = appendStr8(dst, h.cluster)
	dst = appendStr8(dst, h.from)
	dst = appendStr8(dst, h.to)
	dst = append(dst, h.purpose, byte(h.lane))
	return append(dst, h.nonce[:]...)
}

// parseHello decodes a hello's payload.
func parseHello(p []byte) (hello, error) {
	r := reader{b: p}
	var h hello
	h.cluster = r.str8()
	h.from = r.str8()
	h.to = r.str8()
	h.purpose = r.u8()
	h.lane = Lane(r.u8())
	copy(h.nonce[:], r.bytes(nonceLen))
	if err := r.done("hello"); err != nil {
		return hello{}, err
	}
	if h.purpose != purposeLink && h.purpose != purposeConn {
		return hello{}, fmt.Errorf("%w: hello: purpose %d", ErrMalformed, h.purpose)
	}
	return h, nil
}

// appendProof appends a proof frame.
func appendProof(dst []byte, mac []byte) []byte {
	dst = appendFrameHeader(dst, msgProof, len(mac))
	return append(dst, mac...)
}

// parseProof decodes a proof's payload.
func parseProof(p []byte) ([]byte, error) {
	if len(p) != macLen {
		return nil, fmt.Errorf("%w: proof of %d bytes", ErrMalformed, len(p))
	}
	return p, nil
}

// refusal is a refuse message: why the sender closes.
type refusal struct {
	reason Reason
	text   string // for the other side's log; at most 255 bytes
}

// appendTo appends f as a whole frame.
func (f refusal) appendTo(dst []byte) []byte {
	text := f.text
	if len(text) > 255 {
		text = text[:255]
	}
	dst = appendFrameHeader(dst, msgRefuse, 2+len(text))
	dst = append(dst, byte(f.reason))
	return appendStr8(dst, text)
}

// parseRefusal decodes a refuse message's payload.
func parseRefusal(p []byte) (refusal, error) {
	r := reader{b: p}
	f := refusal{reason: Reason(r.u8()), text: r.str8()}
	return f, r.done("refuse")
}

// appendStr8 appends s, at most 255 bytes, after its u8 length.
func appendStr8(dst []byte, s string) []byte {
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

// reader decodes a message's payload with a sticky error: after the
// first short read every read returns zero values, and done reports it.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) bytes(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	b := r.bytes(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (r *reader) str8() string {
	n := r.u8()
	return string(r.bytes(int(n)))
}

// done returns an error if a read ran short or bytes are left over.
func (r *reader) done(what string) error {
	if r.bad {
		return fmt.Errorf("%w: %s: short", ErrMalformed, what)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %s: %d bytes left over", ErrMalformed, what, len(r.b))
	}
	return nil
}
