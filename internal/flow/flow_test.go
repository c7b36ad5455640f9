package flow

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Ensure the accounting: Take and Give move Held, Peak keeps the
// highest, Spent turns at the limit.
func TestCreditAccounting(t *testing.T) {
	c := New(1000)
	if c.Limit() != 1000 || c.Spent() || c.Held() != 0 {
		t.Fatalf("new credit: limit %d, spent %v, held %d", c.Limit(), c.Spent(), c.Held())
	}
	c.Take(600)
	c.Take(300)
	if c.Spent() {
		t.Fatalf("spent at %d of 1000", c.Held())
	}
	c.Take(400) // the message that crosses the limit is taken whole
	if !c.Spent() || c.Held() != 1300 || c.Peak() != 1300 {
		t.Fatalf("held %d, peak %d, spent %v; want 1300, 1300, true", c.Held(), c.Peak(), c.Spent())
	}
	c.Give(1300)
	if c.Spent() || c.Held() != 0 || c.Peak() != 1300 {
		t.Fatalf("after giving back: held %d, peak %d, spent %v", c.Held(), c.Peak(), c.Spent())
	}
	if d := New(0); d.Limit() != DefaultLimit {
		t.Fatalf("New(0).Limit() = %d, want %d", d.Limit(), DefaultLimit)
	}
}

// Ensure Wait returns at once on an unspent credit, without counting a
// hold or showing flow.
func TestCreditWaitUnspent(t *testing.T) {
	c := New(1000)
	c.Take(999)
	if held, ok := c.Wait(nil); held || !ok {
		t.Fatalf("Wait on an unspent credit = %v, %v; want false, true", held, ok)
	}
	if c.Holds() != 0 || c.Flow(time.Hour) {
		t.Fatalf("holds %d, flow %v; want 0, false", c.Holds(), c.Flow(time.Hour))
	}
}

// Ensure a held reader resumes only when the credit is back at half the
// limit, and shows flow while held and for the window after.
func TestCreditWaitResumesAtHalf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000)
		for range 10 {
			c.Take(100)
		}
		done := make(chan bool)
		go func() { held, ok := c.Wait(nil); done <- held && ok }()
		synctest.Wait()
		if !c.Waiting() || !c.Flow(0) || c.Holds() != 1 {
			t.Fatalf("waiting %v, flow %v, holds %d; want true, true, 1", c.Waiting(), c.Flow(0), c.Holds())
		}
		for range 4 { // 900 ... 600: still above half
			c.Give(100)
			synctest.Wait()
			select {
			case <-done:
				t.Fatalf("resumed at %d of 1000", c.Held())
			default:
			}
		}
		c.Give(100) // 500: half
		synctest.Wait()
		if ok := <-done; !ok {
			t.Fatal("Wait did not report a hold that ended")
		}
		if c.Waiting() || !c.Flow(5*time.Second) {
			t.Fatalf("after the wait: waiting %v, flow(5s) %v; want false, true", c.Waiting(), c.Flow(5*time.Second))
		}
		time.Sleep(5*time.Second + time.Millisecond) // the bubble's clock
		if c.Flow(5 * time.Second) {
			t.Fatal("still flow 5 s after the wait")
		}
	})
}

// Ensure Wait gives up when stop is closed.
func TestCreditWaitStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(10)
		c.Take(10)
		stop := make(chan struct{})
		done := make(chan bool)
		go func() { held, ok := c.Wait(stop); done <- held && !ok }()
		synctest.Wait()
		close(stop)
		if !<-done {
			t.Fatal("Wait did not report a hold ended by stop")
		}
		if c.Waiting() {
			t.Fatal("still waiting after stop")
		}
	})
}

// Ensure no wake-up is lost: a reader that takes and waits against
// givers on other goroutines always gets through, and everything taken
// is given back.
func TestCreditNoLostWake(t *testing.T) {
	c := New(64)
	const n = 20000
	work := make(chan int64, n)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := range work {
				c.Give(x)
			}
		}()
	}
	for i := range n {
		if c.Spent() {
			if _, ok := c.Wait(nil); !ok {
				t.Fatal("Wait returned not ok without stop")
			}
		}
		x := int64(1 + i%7)
		c.Take(x)
		work <- x
	}
	close(work)
	wg.Wait()
	if c.Held() != 0 {
		t.Fatalf("held %d after everything was given back", c.Held())
	}
	if p := c.Peak(); p > 64+7 {
		t.Fatalf("peak %d, want at most the limit plus one message (71)", p)
	}
}
