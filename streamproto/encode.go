package streamproto

import "encoding/binary"

func appendU16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendString(b []byte, s string) []byte {
	b = appendU16(b, uint16(len(s)))
	return append(b, s...)
}

func appendStringMap(b []byte, keys []string, m map[string]string) []byte {
	b = appendU32(b, uint32(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}

// beginFrame appends a frame header with a placeholder size; endFrame
// fills the size in. start is len(b) before beginFrame.
func beginFrame(b []byte, key Key, version uint16) ([]byte, int) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendU16(b, uint16(key))
	b = appendU16(b, version)
	return b, start
}

func endFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// beginResponse starts a response frame to key with corr and code.
func beginResponse(b []byte, key Key, corr uint32, code Code) ([]byte, int) {
	b, start := beginFrame(b, key|responseBit, 1)
	b = appendU32(b, corr)
	b = appendU16(b, uint16(code))
	return b, start
}
