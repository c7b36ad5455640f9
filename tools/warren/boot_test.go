package main

import "testing"

// Ensure the data directory trusts a stream's tail only when the boot id
// that last opened it is the machine's current one.
func TestSameBoot(t *testing.T) {
	dir := t.TempDir()
	a, b := []byte("1b2c-aaaa"), []byte("1b2c-bbbb")
	if sameBoot(dir, a) {
		t.Fatal("a directory never opened trusts its tails")
	}
	if err := recordBoot(dir, a); err != nil {
		t.Fatal(err)
	}
	if !sameBoot(dir, a) {
		t.Fatal("the same boot does not trust its tails")
	}
	if sameBoot(dir, b) {
		t.Fatal("another boot trusts the tails")
	}
	if sameBoot(dir, nil) {
		t.Fatal("an unknown boot id trusts the tails")
	}
	if err := recordBoot(dir, b); err != nil || !sameBoot(dir, b) {
		t.Fatalf("recorded %s: %v", b, err)
	}
}
