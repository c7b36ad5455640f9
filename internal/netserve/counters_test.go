package netserve

import (
	"io"
	"strings"
	"testing"
)

// Ensure reads count their bytes and the reads that moved any, and Sent
// counts a write's bytes and the write, ignoring empty writes and a nil
// Counters.
func TestCounters(t *testing.T) {
	var c Counters
	r := c.Reader(io.MultiReader(strings.NewReader("hello"), strings.NewReader(", world")))
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "hello, world" {
		t.Fatalf("ReadAll = %q, %v", b, err)
	}
	if got, want := c.RecvOct.Load(), uint64(12); got != want {
		t.Errorf("RecvOct = %d, want %d", got, want)
	}
	if got, want := c.RecvCnt.Load(), uint64(2); got != want {
		t.Errorf("RecvCnt = %d, want %d", got, want)
	}
	c.Sent(100)
	c.Sent(0)
	c.Sent(-1)
	if c.SendOct.Load() != 100 || c.SendCnt.Load() != 1 {
		t.Errorf("after Sent(100), Sent(0), Sent(-1): SendOct %d SendCnt %d, want 100 and 1", c.SendOct.Load(), c.SendCnt.Load())
	}
	var none *Counters
	none.Sent(5) // no panic
}
