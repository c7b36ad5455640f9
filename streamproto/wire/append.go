package wire

import "encoding/binary"

// AppendU16 appends v big-endian.
func AppendU16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }

// AppendU32 appends v big-endian.
func AppendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

// AppendU64 appends v big-endian.
func AppendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// AppendString appends a protocol string: i16 length, then the bytes. The
// caller keeps s under 32 KiB.
func AppendString(b []byte, s string) []byte {
	b = AppendU16(b, uint16(len(s)))
	return append(b, s...)
}

// AppendBytes appends protocol bytes: i32 length, then p.
func AppendBytes(b []byte, p []byte) []byte {
	b = AppendU32(b, uint32(len(p)))
	return append(b, p...)
}

// AppendStringMap appends a protocol map of the entries of keys, in that
// order, with their values in m ("" for a key m lacks).
func AppendStringMap(b []byte, keys []string, m map[string]string) []byte {
	b = AppendU32(b, uint32(len(keys)))
	for _, k := range keys {
		b = AppendString(b, k)
		b = AppendString(b, m[k])
	}
	return b
}

// BeginFrame appends a frame header with a placeholder size; EndFrame
// fills the size in. start is len(b) before BeginFrame.
func BeginFrame(b []byte, key Key, version uint16) ([]byte, int) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = AppendU16(b, uint16(key))
	b = AppendU16(b, version)
	return b, start
}

// EndFrame fills in the size of the frame BeginFrame started at start.
func EndFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// BeginResponse starts a response (version 1) to key with corr and code.
func BeginResponse(b []byte, key Key, corr uint32, code Code) ([]byte, int) {
	b, start := BeginFrame(b, key|ResponseBit, 1)
	b = AppendU32(b, corr)
	b = AppendU16(b, uint16(code))
	return b, start
}
