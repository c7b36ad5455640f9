// Command loopceiling measures the machine's ceiling for stream replay:
// it sends a file over a loopback TCP connection with sendfile(2), as a
// broker replaying a stream does, to a reader that only counts the bytes.
// No broker and no client parsing can replay the same bytes faster on the
// same machine, so dividing a replay's time by this one says how much of
// it is left to win.
//
//	go run ./bench/cmd/loopceiling -bytes 550000000 -runs 3
//	go run ./bench/cmd/loopceiling -file /path/to/segment -runs 3
//	go run ./bench/cmd/loopceiling -messages 5000000 -bytes 550000000 -json -label scenario=stream-replay/lean
//
// With -messages N each run also reports consume_rate, N over its time:
// the replay rate of an N-message stream of that size if the broker and
// the client cost nothing. -json prints one line per run in the format of
// warren-perf -json (labels and metrics), which warren-perf report reads;
// bench/run.sh puts it next to the lean replay as the target "loopback".
//
// See bench/RESULTS.md for how it bounds the replay ratio.
package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/warren-mq/warren/bench/perf"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("loopceiling: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// run is main with errors returned, so that the temporary file goes
// whatever happens.
func run() error {
	file := flag.String("file", "", "file to send (default: a temporary file of -size random bytes)")
	size := flag.Int64("bytes", 550e6, "size of the temporary file in bytes")
	runs := flag.Int("runs", 3, "number of runs")
	readBuf := flag.Int("read-buffer", 1<<20, "the reader's buffer in bytes")
	messages := flag.Int64("messages", 0, "messages the bytes stand for (reports consume_rate)")
	jsonOut := flag.Bool("json", false, "one JSON record per run on stdout")
	labels := flag.String("label", "", "labels k=v,... for -json (target defaults to loopback)")
	flag.Parse()
	lab, err := perf.ParseLabels(*labels)
	if err != nil {
		return err
	}
	if lab["target"] == "" {
		lab["target"] = "loopback"
	}
	path := *file
	if path == "" {
		if *size <= 0 {
			return fmt.Errorf("-bytes %d: want a positive size", *size)
		}
		dir, err := os.MkdirTemp("", "loopceiling")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "data")
		if err := writeRandom(path, *size); err != nil {
			return err
		}
	}
	for i := 0; i < *runs; i++ {
		n, d, err := measure(path, *readBuf)
		if err != nil {
			return err
		}
		rec := record(lab, n, d, *messages)
		if *jsonOut {
			b, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			fmt.Println(string(b))
			continue
		}
		fmt.Printf("run %d: %d bytes in %v: %.0f MB/s", i+1, n, d.Round(time.Millisecond), rec.Metrics["mb_per_s"])
		if *messages > 0 {
			fmt.Printf(", %.0f msgs/s for %d messages", rec.Metrics["consume_rate"], *messages)
		}
		fmt.Println()
	}
	return nil
}

// measure sends the file at path over loopback once and returns the bytes
// received and the time from the first read to the end of the data. The
// file is read once before the clock starts, so it is in the page cache
// as a just-written stream is.
func measure(path string, readBuf int) (int64, time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	if _, err := io.Copy(io.Discard, f); err != nil {
		return 0, 0, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer ln.Close()
	sent := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			sent <- err
			return
		}
		defer c.Close()
		// A *net.TCPConn reading from an *os.File uses sendfile(2).
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			sent <- err
			return
		}
		_, err = c.(*net.TCPConn).ReadFrom(f)
		sent <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	buf := make([]byte, readBuf)
	var n int64
	start := time.Now()
	for {
		k, err := c.Read(buf)
		n += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, 0, err
		}
	}
	d := time.Since(start)
	if err := <-sent; err != nil {
		return n, d, err
	}
	if n != st.Size() {
		return n, d, fmt.Errorf("received %d bytes of %d", n, st.Size())
	}
	return n, d, nil
}

// record is one run in the format warren-perf report reads.
func record(labels map[string]string, n int64, d time.Duration, messages int64) perf.Record {
	m := map[string]float64{
		"elapsed_s": d.Seconds(),
		"mb_per_s":  float64(n) / d.Seconds() / 1e6,
	}
	if messages > 0 {
		m["consume_rate"] = float64(messages) / d.Seconds()
	}
	return perf.Record{Labels: labels, Metrics: m}
}

func writeRandom(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, rand.Reader, n); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
