package osiris

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/warren-mq/warren/segment"
)

// Ensure a read-ahead reader returns exactly what a plain reader
// returns, chunk for chunk, while a writer appends chunks of mixed sizes
// (a few records, and records larger than the read-ahead window) across
// segment rolls: the same headers, Bloom filters and data, with Data set
// for the chunks that fit in the window and never for those that do not
// (a plain reader has it only for chunks as small as a header read), and
// always for chunks up to half the window, even across its end.
func TestReadAheadMatchesPlainReader(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{MaxSegmentSize: 1 << 20}, Options{RetentionInterval: -1})
	rng := rand.New(rand.NewPCG(1, 2))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const batches = 300
	appended := make(chan error, 1)
	go func() {
		for i := range batches {
			var ms []Message
			n := 1 + rng.IntN(40)
			size := 1 + rng.IntN(300)
			if i%25 == 0 {
				n, size = 1, readAhead+rng.IntN(readAhead) // larger than the window
			}
			for j := range n {
				body := bytes.Repeat([]byte{byte('a' + (i+j)%26)}, size)
				ms = append(ms, Message{Entry: segment.AppendSimpleEntry(nil, body), Filter: []byte(fmt.Sprint(i % 3))})
			}
			if _, err := s.Append(ctx, "", ms...); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	ra, err := s.NewReader(First(), ReaderOptions{ReadAhead: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	plain, err := s.NewReader(First(), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	chunks, inMemory, big := 0, 0, 0
	var want []byte
	for chunks < batches {
		a, err := ra.Next(ctx)
		if err != nil {
			t.Fatalf("read-ahead reader after %d chunks: %v", chunks, err)
		}
		p, err := plain.Next(ctx)
		if err != nil {
			t.Fatalf("plain reader after %d chunks: %v", chunks, err)
		}
		if a.Header != p.Header || a.Pos != p.Pos || !bytes.Equal(a.Bloom, p.Bloom) {
			t.Fatalf("chunk %d: read-ahead %+v at %d, plain %+v at %d", chunks, a.Header, a.Pos, p.Header, p.Pos)
		}
		// A plain reader reads header and Bloom alone, which holds the
		// data of a tiny chunk only.
		if p.Data != nil && p.Header.Size() > segment.HeaderSize+segment.MaxBloomSize {
			t.Fatalf("chunk %d: a plain reader handed out the Data of %d bytes", chunks, p.Header.Size())
		}
		if want, err = p.ReadData(want); err != nil {
			t.Fatal(err)
		}
		if p.Data != nil {
			if w2, _ := (&Chunk{Header: p.Header, File: p.File, Pos: p.Pos}).ReadData(nil); !bytes.Equal(p.Data, w2) {
				t.Fatalf("chunk %d: a plain reader's Data differs from the file", chunks)
			}
		}
		got, err := a.ReadData(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("chunk %d: data differs", chunks)
		}
		if a.Data != nil {
			inMemory++
		} else if a.Header.Size() <= readAhead/2 {
			// Not even across the window's end: the window moves.
			t.Fatalf("chunk %d of %d bytes came without Data", chunks, a.Header.Size())
		}
		if a.Header.Size() > readAhead {
			big++
			if a.Data != nil {
				t.Fatalf("chunk %d of %d bytes came in memory", chunks, a.Header.Size())
			}
		}
		chunks++
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if big == 0 || inMemory < (batches-big)/2 {
		t.Fatalf("%d chunks: %d in memory, %d larger than the window", chunks, inMemory, big)
	}
	if st := s.Stats(); st.Segments < 2 {
		t.Fatalf("no segment roll: %+v", st)
	}
	t.Logf("%d chunks: %d in memory, %d large", chunks, inMemory, big)
}
