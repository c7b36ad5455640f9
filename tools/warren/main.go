// Command warren is the Warren broker daemon.
//
// Until the protocol front ends land (stream protocol on 5552, AMQP 0-9-1
// on 5672), it runs the storage core: it opens (or creates) the stream
// "demo" under -data-dir, appends a batch of messages with confirms,
// replays the stream from the first offset and prints what it measured.
// Run it twice to see the data and offsets survive a restart.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/segment"
)

func main() {
	dataDir := flag.String("data-dir", "warren-data", "directory for all broker data")
	count := flag.Int("messages", 100_000, "messages the storage demo appends")
	size := flag.Int("size", 100, "message size in bytes")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*dataDir, *count, *size, logger); err != nil {
		logger.Error("warren", "err", err)
		os.Exit(1)
	}
}

func run(dataDir string, count, size int, logger *slog.Logger) error {
	dir := filepath.Join(dataDir, "streams", "demo")
	s, err := osiris.Open(dir, osiris.Options{Logger: logger})
	if err != nil {
		if s, err = osiris.Create(dir, osiris.Config{}, osiris.Options{Logger: logger}); err != nil {
			return err
		}
	}
	defer s.Close()
	before := s.Stats()
	logger.Info("stream opened", "dir", dir, "next_offset", before.NextOffset, "segments", before.Segments)

	body := make([]byte, size)
	entry := segment.AppendSimpleEntry(nil, body)
	const perBatch = 1000
	start := time.Now()
	pending := make(chan osiris.Result, 64)
	inflight := 0
	for sent := 0; sent < count; sent += perBatch {
		batch := &osiris.Batch{Done: func(r osiris.Result) { pending <- r }}
		for i := 0; i < perBatch && sent+i < count; i++ {
			batch.Messages = append(batch.Messages, osiris.Message{Entry: entry})
		}
		if inflight == cap(pending) {
			if r := <-pending; r.Err != nil {
				return r.Err
			}
			inflight--
		}
		if err := s.Submit(batch); err != nil {
			return err
		}
		inflight++
	}
	for ; inflight > 0; inflight-- {
		if r := <-pending; r.Err != nil {
			return r.Err
		}
	}
	appendTime := time.Since(start)

	start = time.Now()
	r, err := s.NewReader(osiris.First(), osiris.ReaderOptions{})
	if err != nil {
		return err
	}
	defer r.Close()
	var buf []byte
	var records, chunks int
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if buf, err = c.ReadData(buf); err != nil {
			return err
		}
		chunks++
		records += int(c.Header.NumRecords)
	}
	readTime := time.Since(start)
	st := s.Stats()
	mb := float64(count*size) / 1e6
	fmt.Printf("appended %d x %d B in %v (%.0f msg/s, %.1f MB/s, confirmed)\n",
		count, size, appendTime.Round(time.Millisecond), float64(count)/appendTime.Seconds(), mb/appendTime.Seconds())
	fmt.Printf("replayed %d records in %d chunks from offset %d in %v (%.0f msg/s)\n",
		records, chunks, st.FirstOffset, readTime.Round(time.Millisecond), float64(records)/readTime.Seconds())
	fmt.Printf("stream: first offset %d, next offset %d, %d segments, %d bytes\n",
		st.FirstOffset, st.NextOffset, st.Segments, st.Bytes)
	return nil
}
