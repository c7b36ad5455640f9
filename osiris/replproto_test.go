package osiris

import (
	"bufio"
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/warren-mq/warren/segment"
)

// Ensure each frame encodes to the documented bytes and decodes back.
func TestReplicationFrameBytes(t *testing.T) {
	hello := Hello{Member: "r1", History: EpochHistory{First: 0, Next: 300, Starts: []EpochStart{{1, 0}, {2, 200}}}}
	cases := []struct {
		name  string
		frame []byte
		want  []byte
	}{
		{"hello", hello.AppendTo(nil), []byte{
			0, 0, 0, 57, // length: version, type and 55 bytes of payload
			1, 1, // version 1, hello
			2, 'r', '1', // member
			0, 0, 0, 0, 0, 0, 0, 0, // first offset 0
			0, 0, 0, 0, 0, 0, 1, 0x2c, // next offset 300
			0, 0, 0, 2, // two epochs
			0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, // epoch 1 from chunk 0
			0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0xc8, // epoch 2 from chunk 200
		}},
		{"start", appendStart(nil, 200, true), []byte{
			0, 0, 0, 11, // length
			1, 2, // version 1, start
			1,                         // flags: reset
			0, 0, 0, 0, 0, 0, 0, 0xc8, // offset 200
		}},
		{"chunks", append(appendChunksHeader(nil, 7, 3), 0xa, 0xb, 0xc), []byte{
			0, 0, 0, 13, // length
			1, 3, // version 1, chunks
			0, 0, 0, 0, 0, 0, 0, 7, // commit chunk 7
			0xa, 0xb, 0xc, // chunk bytes
		}},
		{"commit", appendOffsetFrame(nil, FrameCommit, -1), []byte{
			0, 0, 0, 10, // length
			1, 4, // version 1, commit
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // no chunk committed
		}},
		{"ack", appendOffsetFrame(nil, FrameAck, 258), []byte{
			0, 0, 0, 10, // length
			1, 5, // version 1, ack
			0, 0, 0, 0, 0, 0, 1, 2, // chunk 258
		}},
	}
	for _, c := range cases {
		if !bytes.Equal(c.frame, c.want) {
			t.Errorf("%s: got % x, want % x", c.name, c.frame, c.want)
		}
	}
	var all []byte
	for _, c := range cases {
		all = append(all, c.want...)
	}
	br := bufio.NewReader(bytes.NewReader(all))
	var buf []byte
	for _, c := range cases {
		typ, p, b, err := readFrame(br, buf)
		buf = b
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(p, c.want[frameHeaderSize:]) || typ.String() != c.name {
			t.Fatalf("%s: read %s % x", c.name, typ, p)
		}
	}
	var h Hello
	if err := h.ReadFrom(cases[0].want[frameHeaderSize:]); err != nil || h.Member != "r1" || h.History.Next != 300 || len(h.History.Starts) != 2 || h.History.Starts[1] != (EpochStart{2, 200}) {
		t.Fatalf("hello: %+v, %v", h, err)
	}
	if _, _, _, err := readFrame(br, buf); err == nil {
		t.Fatal("read past the end")
	}
}

// Ensure a frame that declares more bytes than it sends, a bad version,
// type or length, fails without reading on.
func TestReplicationFrameErrors(t *testing.T) {
	for _, b := range [][]byte{
		{0, 0, 0, 1, 1, 5},                          // length below the version and type
		{0xff, 0xff, 0xff, 0xff, 1, 3},              // length over MaxFrameSize
		{0, 0, 0, 10, 2, 5, 0, 0, 0, 0, 0, 0, 0, 0}, // version 2
		{0, 0, 0, 10, 1, 9, 0, 0, 0, 0, 0, 0, 0, 0}, // type 9
		{0, 0x10, 0, 0, 1, 3, 0, 0},                 // 1 MiB declared, 2 bytes sent
	} {
		if _, _, _, err := readFrame(bufio.NewReader(bytes.NewReader(b)), nil); err == nil {
			t.Errorf("% x: no error", b)
		}
	}
	var h Hello
	if err := h.ReadFrom([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}); !errors.Is(err, ErrFrame) {
		t.Errorf("hello with 2^32-1 epochs in no bytes: %v", err)
	}
}

// FuzzReplicationFrames feeds bytes from the network to the frame reader
// and the decoders, and the chunks of Chunks frames to a replica:
// nothing panics, decoded frames encode back to their bytes, and a
// replica takes only chunks that verify and follow on.
func FuzzReplicationFrames(f *testing.F) {
	// Seeds: a handshake and chunks as a leader sends them.
	dir := f.TempDir()
	leader, err := Create(filepath.Join(dir, "seed"), Config{}, Options{RetentionInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 3 {
		if _, err := leader.Append(f.Context(), "p", Message{Entry: segment.AppendSimpleEntry(nil, []byte{byte(i)}), PublishingID: uint64(i + 1)}); err != nil {
			f.Fatal(err)
		}
	}
	if err := leader.StoreOffset("c", 1); err != nil {
		f.Fatal(err)
	}
	if err := leader.Flush(); err != nil {
		f.Fatal(err)
	}
	raw := make([]byte, 0, 1024)
	rd, err := leader.NewReader(First(), ReaderOptions{AllChunks: true})
	if err != nil {
		f.Fatal(err)
	}
	for {
		c, ok, err := rd.TryNext()
		if err != nil {
			f.Fatal(err)
		}
		if !ok {
			break
		}
		b := make([]byte, c.Header.Size())
		if _, err := c.File.ReadAt(b, c.Pos); err != nil {
			f.Fatal(err)
		}
		raw = append(raw, b...)
	}
	rd.Close()
	leader.Close()
	hello := Hello{Member: "r", History: EpochHistory{Next: 4, Starts: []EpochStart{{1, 0}}}}
	f.Add(hello.AppendTo(nil))
	f.Add(append(appendStart(nil, 0, false), appendOffsetFrame(nil, FrameCommit, 2)...))
	f.Add(append(appendChunksHeader(nil, 1, len(raw)), raw...))
	f.Add(append(appendChunksHeader(nil, 0, len(raw)-3), raw[:len(raw)-3]...))

	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		var buf []byte
		var replica *Stream
		defer func() {
			if replica != nil {
				replica.Close()
			}
		}()
		for {
			typ, p, b, err := readFrame(br, buf)
			buf = b
			if err != nil {
				return
			}
			switch typ {
			case FrameHello:
				var h Hello
				if h.ReadFrom(p) == nil {
					if out := h.AppendTo(nil); !bytes.Equal(out[frameHeaderSize:], p) {
						t.Fatalf("hello % x encodes back to % x", p, out[frameHeaderSize:])
					}
				}
			case FrameStart:
				if off, reset, err := parseStart(p); err == nil {
					if out := appendStart(nil, off, reset); !bytes.Equal(out[frameHeaderSize:], p) {
						t.Fatalf("start % x encodes back to % x", p, out[frameHeaderSize:])
					}
				}
			case FrameCommit, FrameAck:
				if c, err := parseOffsetFrame(p, typ); err == nil {
					if out := appendOffsetFrame(nil, typ, c); !bytes.Equal(out[frameHeaderSize:], p) {
						t.Fatalf("%s % x encodes back to % x", typ, p, out[frameHeaderSize:])
					}
				}
			case FrameChunks:
				commit, chunks, err := parseChunks(p)
				if err != nil {
					continue
				}
				if replica == nil {
					replica, err = Create(t.TempDir(), Config{}, Options{RetentionInterval: -1,
						Replication: &Replication{Role: RoleReplica, Member: "r", Members: 2}})
					if err != nil {
						t.Fatal(err)
					}
				}
				before := replica.lastWritten.Load()
				replica.repl.raiseLeaderCommit(commit)
				last, err := replica.AppendChunks(chunks)
				if err == nil {
					// Every chunk verified and followed on.
					for rest := chunks; len(rest) > 0; {
						h, verr := segment.Verify(rest[:min(len(rest), int(mustHeaderSize(t, rest)))])
						if verr != nil {
							t.Fatalf("accepted a chunk that does not verify: %v", verr)
						}
						rest = rest[h.Size():]
					}
					if last < before {
						t.Fatalf("last chunk %d after %d", last, before)
					}
				}
			}
		}
	})
}

// mustHeaderSize is the size of the chunk whose header starts b.
func mustHeaderSize(t *testing.T, b []byte) int64 {
	h, err := segment.ParseHeader(b)
	if err != nil {
		t.Fatalf("accepted chunk bytes with a bad header: %v", err)
	}
	return h.Size()
}
