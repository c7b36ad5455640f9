package segment

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// These constants are part of the on-disk format and must not be changed.
const (
	// SegmentVersion is the format version of the segment files Create
	// writes: 2, whose chunk filters are FilterV2. Open also reads version
	// 1, whose chunk filters are FilterV1; Append refuses those segments
	// (ErrReadOnly), so a segment never mixes filter formats.
	SegmentVersion = 2
	// oldestSegmentVersion is the oldest segment file version Open reads.
	oldestSegmentVersion = 1
	// IndexVersion is the format version of index files.
	IndexVersion = 1
	// FileHeaderSize is the size of the segment and index file headers.
	FileHeaderSize = 8
	// IndexRecordSize is the size of one index record.
	IndexRecordSize = 29

	segmentMagic = "WRNS"
	indexMagic   = "WRNI"

	// SegmentExt and IndexExt are the file name extensions.
	SegmentExt = ".segment"
	IndexExt   = ".index"

	// MaxSegmentPos is the largest file position an index record can hold.
	MaxSegmentPos = 1<<32 - 1
)

const _ = uint(IndexRecordSize - (8 + 8 + 8 + 4 + 1))

// IndexRecord locates one chunk in its segment file.
type IndexRecord struct {
	ChunkID   uint64    // offset of the chunk's first record
	Timestamp int64     // chunk timestamp, ms
	Epoch     uint64    // chunk epoch
	Pos       uint32    // byte position of the chunk header in the segment file
	Type      ChunkType // chunk type
}

// AppendTo appends the 29-byte stored form of r to dst.
func (r *IndexRecord) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, r.ChunkID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Timestamp))
	dst = binary.BigEndian.AppendUint64(dst, r.Epoch)
	dst = binary.BigEndian.AppendUint32(dst, r.Pos)
	return append(dst, byte(r.Type))
}

// parseIndexRecord decodes a record from the first IndexRecordSize bytes of b.
func parseIndexRecord(b []byte) IndexRecord {
	return IndexRecord{
		ChunkID:   binary.BigEndian.Uint64(b[0:]),
		Timestamp: int64(binary.BigEndian.Uint64(b[8:])),
		Epoch:     binary.BigEndian.Uint64(b[16:]),
		Pos:       binary.BigEndian.Uint32(b[24:]),
		Type:      ChunkType(b[28]),
	}
}

// isZero reports whether b (one record) is all zeros: the end of valid data
// in a zero-filled index.
func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// RecordFor returns the index record of a chunk at pos.
func RecordFor(h *Header, pos int64) IndexRecord {
	return IndexRecord{ChunkID: h.ChunkID, Timestamp: h.Timestamp, Epoch: h.Epoch, Pos: uint32(pos), Type: h.Type}
}

// matches reports whether r describes the chunk with header h at pos.
func (r *IndexRecord) matches(h *Header, pos int64) bool {
	return r.ChunkID == h.ChunkID && r.Timestamp == h.Timestamp && r.Epoch == h.Epoch &&
		int64(r.Pos) == pos && r.Type == h.Type
}

// SegmentFileName is the name of the segment file whose first chunk is base.
func SegmentFileName(base uint64) string { return fmt.Sprintf("%020d%s", base, SegmentExt) }

// IndexFileName is the name of the index file of the segment starting at base.
func IndexFileName(base uint64) string { return fmt.Sprintf("%020d%s", base, IndexExt) }

// ParseSegmentFileName returns the base offset of a segment file name.
func ParseSegmentFileName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, SegmentExt)
	if !ok || len(s) != 20 {
		return 0, false
	}
	base, err := strconv.ParseUint(s, 10, 64)
	return base, err == nil
}

// appendFileHeader appends the header a new file with magic gets: the
// current version of its format.
func appendFileHeader(dst []byte, magic string) []byte {
	v := uint32(IndexVersion)
	if magic == segmentMagic {
		v = SegmentVersion
	}
	dst = append(dst, magic...)
	return binary.BigEndian.AppendUint32(dst, v)
}

// readableVersion reports whether this code reads version v of the files
// with magic.
func readableVersion(magic string, v uint32) bool {
	if magic == segmentMagic {
		return v >= oldestSegmentVersion && v <= SegmentVersion
	}
	return v == IndexVersion
}
