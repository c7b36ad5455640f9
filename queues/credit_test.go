package queues

import "testing"

// Ensure a credited consumer gets exactly its credit, acks give none
// back, SetCredit resumes deliveries, and DrainCredit returns what the
// queue could not fill and leaves the credit at 0.
func TestCreditedConsumer(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareQ(t, b, "q", false)
	publishQ(t, q, false, seqBodies("m", 0, 5)...)
	s := newSink(0)
	c, err := q.Consume(ConsumerOptions{Tag: "c", Sink: s, Credited: true, Credit: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := s.wait(t, 2)
	q.Ack(got[0].id, got[1].id)
	q.Kick()
	wantCounts(t, q, 3, 1)
	c.SetCredit(1)
	s.wait(t, 3)
	wantCounts(t, q, 2, 1)
	c.SetCredit(4)
	if left := c.DrainCredit(); left != 2 {
		t.Fatalf("DrainCredit = %d, want 2 (4 granted, 2 ready)", left)
	}
	if got := s.wait(t, 5); len(got) != 5 {
		t.Fatalf("%d deliveries, want 5", len(got))
	}
	publishQ(t, q, false, "late")
	wantCounts(t, q, 1, 1)
	c.Stop()
}
