package raft

import (
	"errors"
	"testing"

	"github.com/warren-mq/warren/internal/testutil"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func heartbeat() *pb.Message {
	return &pb.Message{Type: pb.MsgHeartbeat.Enum(), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(3))}
}

func TestEnvelopeBytes(t *testing.T) {
	got, err := AppendEnvelopes([]byte{0xff}, []Envelope{
		{Group: 7, Msg: heartbeat()},
		{Group: 1 << 40, Msg: &pb.Message{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.AssertBytes(t, got, testutil.HexBytes(t, `
		ff                  # dst before
		0000000000000007    # group 7
		00000008            # 8 bytes of message
		08 08               # type: MsgHeartbeat
		10 02               # to: 2
		18 01               # from: 1
		20 03               # term: 3
		0000010000000000    # group 1<<40
		00000000            # an empty message
	`))
	envs, err := DecodeEnvelopes(got[1:])
	if err != nil {
		t.Fatal(err)
	}
	if len(envs) != 2 || envs[0].Group != 7 || !proto.Equal(envs[0].Msg, heartbeat()) || envs[1].Group != 1<<40 || !proto.Equal(envs[1].Msg, &pb.Message{}) {
		t.Fatalf("decoded %v", envs)
	}
}

func TestDecodeEnvelopesRefuses(t *testing.T) {
	good, _ := AppendEnvelope(nil, Envelope{Group: 1, Msg: heartbeat()})
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short header", good[:11], ErrCorruptMessage},
		{"short message", good[:len(good)-1], ErrCorruptMessage},
		{"too large", testutil.HexBytes(t, "0000000000000001 04000001"), ErrMessageTooLarge},
		{"not protobuf", testutil.HexBytes(t, "0000000000000001 00000002 08 ff"), ErrCorruptMessage},
	} {
		if _, err := DecodeEnvelopes(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestEntryData(t *testing.T) {
	id := proposalID{node: 1, incarnation: 0xabcdef, seq: 9}
	b := appendEntryData(nil, id, []byte("hi"))
	testutil.AssertBytes(t, b, testutil.HexBytes(t, `
		01                  # format 1
		0000000000000001    # node
		0000000000abcdef    # incarnation
		0000000000000009    # sequence
		'hi'                # payload
	`))
	got, payload, err := decodeEntryData(b)
	if err != nil || got != id || string(payload) != "hi" {
		t.Fatalf("got %v %q %v, want %v %q", got, payload, err, id, "hi")
	}
	if _, _, err := decodeEntryData(b[:10]); !errors.Is(err, ErrCorruption) {
		t.Fatalf("short entry data: got %v, want ErrCorruption", err)
	}
}

// FuzzDecodeEnvelopes checks that the decoder of bytes from the network
// never panics, and that what it accepts encodes and decodes to the same
// messages.
func FuzzDecodeEnvelopes(f *testing.F) {
	app := &pb.Message{
		Type: pb.MsgApp.Enum(), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(5)),
		LogTerm: new(uint64(4)), Index: new(uint64(10)), Commit: new(uint64(9)),
		Entries: []*pb.Entry{
			{Term: new(uint64(5)), Index: new(uint64(11)), Data: appendEntryData(nil, proposalID{1, 2, 3}, []byte("x"))},
			{Term: new(uint64(5)), Index: new(uint64(12)), Type: pb.EntryConfChange.Enum()},
		},
	}
	snap := &pb.Message{
		Type: pb.MsgSnap.Enum(), To: new(uint64(3)), From: new(uint64(1)),
		Snapshot: &pb.Snapshot{Data: []byte("state"), Metadata: &pb.SnapshotMetadata{
			Index: new(uint64(100)), Term: new(uint64(5)),
			ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}},
		}},
	}
	for _, envs := range [][]Envelope{
		{{Group: 1, Msg: heartbeat()}},
		{{Group: 0, Msg: app}, {Group: 9, Msg: snap}},
	} {
		b, err := AppendEnvelopes(nil, envs)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-3])
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		envs, err := DecodeEnvelopes(b)
		if err != nil {
			return
		}
		again, err := AppendEnvelopes(nil, envs)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		envs2, err := DecodeEnvelopes(again)
		if err != nil {
			t.Fatalf("decode re-encoded: %v", err)
		}
		if len(envs2) != len(envs) {
			t.Fatalf("%d envelopes, then %d", len(envs), len(envs2))
		}
		for i := range envs {
			if envs[i].Group != envs2[i].Group || !proto.Equal(envs[i].Msg, envs2[i].Msg) {
				t.Fatalf("envelope %d: %v, then %v", i, envs[i], envs2[i])
			}
		}
	})
}
