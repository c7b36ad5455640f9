package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/warren-mq/warren/bench/perf"
	"os"
	"path/filepath"
	"testing"
)

// Ensure measure receives every byte of the file.
func TestMeasure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	if err := writeRandom(path, 3<<20+17); err != nil {
		t.Fatal(err)
	}
	for _, rb := range []int{4096, 1 << 20} {
		n, d, err := measure(path, rb)
		if err != nil || n != 3<<20+17 || d <= 0 {
			t.Errorf("read buffer %d: %d bytes in %v, err %v; want %d bytes", rb, n, d, err, 3<<20+17)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil || bytes.Count(b, []byte{0}) > len(b)/128 {
		t.Errorf("the file is not random data (err %v)", err)
	}
}

// Ensure -json records read back through perf.ReadRecords and report the
// replay rate of the messages the bytes stand for.
func TestRecordReadsAsPerfRecord(t *testing.T) {
	lab := map[string]string{"target": "loopback", "scenario": "stream-replay/lean", "pair": "2"}
	b, err := json.Marshal(record(lab, 500e6, 250*time.Millisecond, 5e6))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := perf.ReadRecords(strings.NewReader(string(b) + "\n"))
	if err != nil || len(recs) != 1 {
		t.Fatalf("ReadRecords: %d records, err %v", len(recs), err)
	}
	r := recs[0]
	if r.Labels["target"] != "loopback" || r.Labels["scenario"] != "stream-replay/lean" || r.Labels["pair"] != "2" {
		t.Errorf("labels %v", r.Labels)
	}
	if r.Metrics["consume_rate"] != 2e7 || r.Metrics["mb_per_s"] != 2000 || r.Metrics["elapsed_s"] != 0.25 {
		t.Errorf("metrics %v", r.Metrics)
	}
	if _, ok := record(lab, 1, time.Second, 0).Metrics["consume_rate"]; ok {
		t.Error("consume_rate without -messages")
	}
}
