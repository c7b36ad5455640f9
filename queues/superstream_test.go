package queues

import (
	"errors"
	"slices"
	"testing"
)

// Ensure a super stream creates its partitions, routes by exact binding
// key, gives partition indexes, rolls back on failure and deletes whole.
func TestSuperStreams(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	parts := []string{"ss-a", "ss-b", "ss-c"}
	if err := b.CreateSuperStream("/", "ss", parts, []string{"a", "b", "a"}, map[string]string{"max-age": "1h"}); err != nil {
		t.Fatal(err)
	}
	def, err := b.SuperStream("/", "ss")
	if err != nil {
		t.Fatal(err)
	}
	if got := def.Route("a"); !slices.Equal(got, []string{"ss-a", "ss-c"}) {
		t.Fatalf("route a = %v", got)
	}
	if got := def.Route("z"); len(got) != 0 {
		t.Fatalf("route z = %v", got)
	}
	for i, p := range parts {
		if s, err := b.Stream("/", p); err != nil || s.Config().MaxAge.Hours() != 1 {
			t.Fatalf("partition %s: %v", p, err)
		}
		if got := b.PartitionIndex("/", "ss", p); got != i {
			t.Fatalf("PartitionIndex(%s) = %d", p, got)
		}
	}
	if got := b.PartitionIndex("/", "other", "x-7"); got != 7 {
		t.Fatalf("index from the name = %d", got)
	}
	if got := b.PartitionIndex("/", "other", "plain"); got != -1 {
		t.Fatalf("plain index = %d", got)
	}
	if err := b.CreateSuperStream("/", "ss", parts, []string{"a", "b", "c"}, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("create twice: %v", err)
	}
	for _, bad := range [][2][]string{
		{{"x-0", "x-0"}, {"0", "1"}},
		{{"x-0"}, {"0", "1"}},
		{{}, {}},
		{{"amq.x"}, {"0"}},
	} {
		if err := b.CreateSuperStream("/", "x", bad[0], bad[1], nil); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("partitions %v keys %v: %v", bad[0], bad[1], err)
		}
	}
	// A taken partition name refuses the whole super stream, leaving nothing.
	if err := b.CreateStream("/", "y-1", nil); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSuperStream("/", "y", []string{"y-0", "y-1"}, []string{"0", "1"}, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("taken partition: %v", err)
	}
	if _, err := b.Stream("/", "y-0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("y-0 left behind: %v", err)
	}
	if err := b.DeleteSuperStream("/", "ss"); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if _, err := b.Stream("/", p); !errors.Is(err, ErrNotFound) {
			t.Fatalf("partition %s after delete: %v", p, err)
		}
	}
	if err := b.DeleteSuperStream("/", "ss"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}
