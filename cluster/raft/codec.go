package raft

import (
	"encoding/binary"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Wire and log formats (see doc.go). These constants are part of the
// wire and on-disk formats and must not be changed.
const (
	// envelopeHeaderLen is u64 group + u32 message length.
	envelopeHeaderLen = 12
	// MaxMessageSize bounds one encoded raft message; larger ones are
	// refused by the decoder before allocating.
	MaxMessageSize = 64 << 20

	// entryFormatV1 starts the data of every entry Propose makes:
	// u8 format | u64 origin node | u64 incarnation | u64 sequence | payload.
	entryFormatV1  = 1
	entryHeaderLen = 1 + 8 + 8 + 8
)

// Envelope is a raft message and the group it belongs to.
type Envelope struct {
	Group uint64
	Msg   *pb.Message
}

// AppendEnvelope appends env's encoding to dst:
//
//	u64 group | u32 n | n bytes of the protobuf raftpb.Message
//
// all big-endian.
func AppendEnvelope(dst []byte, env Envelope) ([]byte, error) {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, env.Group)
	dst = append(dst, 0, 0, 0, 0) // reserve the length
	dst, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, env.Msg)
	if err != nil {
		return dst[:start], fmt.Errorf("raft: encode message of group %d: %w", env.Group, err)
	}
	n := len(dst) - start - envelopeHeaderLen
	if n > MaxMessageSize {
		return dst[:start], fmt.Errorf("raft: message of group %d is %d bytes: %w", env.Group, n, ErrMessageTooLarge)
	}
	binary.BigEndian.PutUint32(dst[start+8:], uint32(n))
	return dst, nil
}

// AppendEnvelopes appends each of envs to dst.
func AppendEnvelopes(dst []byte, envs []Envelope) ([]byte, error) {
	var err error
	for _, env := range envs {
		if dst, err = AppendEnvelope(dst, env); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// DecodeEnvelopes decodes the envelopes AppendEnvelopes wrote, all of
// b. The messages do not alias b.
func DecodeEnvelopes(b []byte) ([]Envelope, error) {
	var out []Envelope
	for off := 0; off < len(b); {
		if len(b)-off < envelopeHeaderLen {
			return nil, fmt.Errorf("raft: envelope at %d: %d bytes left for a %d-byte header: %w", off, len(b)-off, envelopeHeaderLen, ErrCorruptMessage)
		}
		group := binary.BigEndian.Uint64(b[off:])
		n := uint64(binary.BigEndian.Uint32(b[off+8:]))
		off += envelopeHeaderLen
		if n > MaxMessageSize {
			return nil, fmt.Errorf("raft: envelope at %d: message of %d bytes: %w", off, n, ErrMessageTooLarge)
		}
		if n > uint64(len(b)-off) {
			return nil, fmt.Errorf("raft: envelope at %d: message of %d bytes, %d left: %w", off, n, len(b)-off, ErrCorruptMessage)
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(b[off:off+int(n)], m); err != nil {
			return nil, fmt.Errorf("raft: envelope at %d of group %d: %w: %v", off, group, ErrCorruptMessage, err)
		}
		off += int(n)
		out = append(out, Envelope{Group: group, Msg: m})
	}
	return out, nil
}

// proposalID names a proposal: the node that made it, the host's
// incarnation (random per Open) and a sequence number.
type proposalID struct {
	node, incarnation, seq uint64
}

// appendEntryData appends the data of a proposed entry to dst.
func appendEntryData(dst []byte, id proposalID, payload []byte) []byte {
	dst = append(dst, entryFormatV1)
	dst = binary.BigEndian.AppendUint64(dst, id.node)
	dst = binary.BigEndian.AppendUint64(dst, id.incarnation)
	dst = binary.BigEndian.AppendUint64(dst, id.seq)
	return append(dst, payload...)
}

// decodeEntryData splits an entry's data into id and payload. Empty data
// (the entry a new leader appends) has the zero id and no payload.
func decodeEntryData(data []byte) (proposalID, []byte, error) {
	if len(data) == 0 {
		return proposalID{}, nil, nil
	}
	if data[0] != entryFormatV1 || len(data) < entryHeaderLen {
		return proposalID{}, nil, fmt.Errorf("raft: entry data of %d bytes, format %d: %w", len(data), data[0], ErrCorruption)
	}
	id := proposalID{
		node:        binary.BigEndian.Uint64(data[1:]),
		incarnation: binary.BigEndian.Uint64(data[9:]),
		seq:         binary.BigEndian.Uint64(data[17:]),
	}
	return id, data[entryHeaderLen:], nil
}
