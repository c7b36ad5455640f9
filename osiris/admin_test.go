package osiris

import (
	"context"
	"testing"
)

func TestProducersAndOffsetsListed(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{}, Options{})
	defer s.Close()
	ctx := context.Background()
	with := func(id uint64, body string) Message { m := msg(body); m.PublishingID = id; return m }
	if _, err := s.Append(ctx, "p-b", with(1, "a"), with(2, "b")); err != nil {
		t.Fatal(err)
	}
	r, err := s.Append(ctx, "p-a", with(7, "c"))
	if err != nil || r.Written != 1 {
		t.Fatal(r, err)
	}
	r, err = s.Append(ctx, "p-b", with(2, "b"), with(3, "d"), with(1, "a"))
	if err != nil || r.Written != 1 || r.Duplicates != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	got := s.Producers()
	if len(got) != 2 || got[0].Reference != "p-a" || got[0].LastPublishingID != 7 || got[0].Duplicates != 0 ||
		got[1].Reference != "p-b" || got[1].LastPublishingID != 3 || got[1].Duplicates != 2 {
		t.Fatalf("producers %+v", got)
	}
	if err := s.StoreOffset("c1", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if o := s.Offsets(); len(o) != 1 || o["c1"] != 2 {
		t.Fatalf("offsets %v", o)
	}
}
