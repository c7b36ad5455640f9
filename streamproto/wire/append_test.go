package wire

import (
	"bytes"
	"testing"
)

// Ensure the appenders write big-endian fields after what is already in
// the buffer, and AppendStringMap writes entries in the order of keys.
func TestAppenders(t *testing.T) {
	b := []byte{0xaa} // existing content is kept
	b = AppendU16(b, 0x0102)
	b = AppendU32(b, 0x03040506)
	b = AppendU64(b, 0x0708090a0b0c0d0e)
	b = AppendString(b, "hey")
	b = AppendString(b, "")
	b = AppendBytes(b, []byte{0xfe})
	b = AppendStringMap(b, []string{"b", "a", "c"}, map[string]string{"a": "1", "b": "22"})
	want := []byte{
		0xaa,       // existing
		0x01, 0x02, // u16
		0x03, 0x04, 0x05, 0x06, // u32
		0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, // u64
		0x00, 0x03, 'h', 'e', 'y', // string "hey"
		0x00, 0x00, // string ""
		0x00, 0x00, 0x00, 0x01, 0xfe, // bytes length 1
		0x00, 0x00, 0x00, 0x03, // map count 3 (the keys given)
		0x00, 0x01, 'b', 0x00, 0x02, '2', '2', //   b = "22"
		0x00, 0x01, 'a', 0x00, 0x01, '1', //   a = "1"
		0x00, 0x01, 'c', 0x00, 0x00, //   c = "" (absent from the map)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("appended\n got % x\nwant % x", b, want)
	}
}

// Ensure BeginFrame reserves the size, EndFrame fills in the bytes after
// the size field, and frames can follow each other and existing bytes.
func TestFrame(t *testing.T) {
	b := []byte("xy") // bytes already queued
	b, start := BeginFrame(b, KeyHeartbeat, 1)
	if start != 2 {
		t.Fatalf("start = %d, want 2", start)
	}
	b = EndFrame(b, start)
	b, start = BeginFrame(b, KeyMetadataUpdate, 1)
	b = AppendU16(b, uint16(CodeStreamNotAvailable))
	b = AppendString(b, "s1")
	b = EndFrame(b, start)
	want := []byte{
		'x', 'y', // existing
		// Heartbeat
		0x00, 0x00, 0x00, 0x04, // size: key + version
		0x00, 0x17, // key Heartbeat
		0x00, 0x01, // version 1
		// MetadataUpdate
		0x00, 0x00, 0x00, 0x0a, // size 10
		0x00, 0x10, // key MetadataUpdate
		0x00, 0x01, // version 1
		0x00, 0x06, // code stream not available
		0x00, 0x02, 's', '1', // stream "s1"
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("frames\n got % x\nwant % x", b, want)
	}
}

// Ensure BeginResponse sets the response bit, writes version 1, and echoes
// the correlation id before the code.
func TestBeginResponse(t *testing.T) {
	b, start := BeginResponse([]byte{0xee}, KeyQueryOffset, 0x01020304, CodeNoOffset)
	b = AppendU64(b, 0)
	b = EndFrame(b, start)
	want := []byte{
		0xee,                   // existing
		0x00, 0x00, 0x00, 0x12, // size 18
		0x80, 0x0b, // key QueryOffset | 0x8000
		0x00, 0x01, // version 1
		0x01, 0x02, 0x03, 0x04, // correlation id
		0x00, 0x13, // code no offset
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // offset 0
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("response\n got % x\nwant % x", b, want)
	}
}

// Ensure encoding a frame into a buffer with room allocates nothing.
func TestAppendAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	m := map[string]string{"product": "Warren"}
	keys := []string{"product"}
	allocs := testing.AllocsPerRun(100, func() {
		b, start := BeginResponse(buf[:0], KeyPeerProperties, 7, CodeOK)
		b = AppendStringMap(b, keys, m)
		b = AppendBytes(b, []byte("x"))
		EndFrame(b, start)
	})
	if allocs != 0 {
		t.Errorf("allocs = %v, want 0", allocs)
	}
}
