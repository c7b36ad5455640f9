package node

import (
	"bytes"
	"testing"
)

// A store-offset request reads back as written, byte for byte.
func TestStoreOffsetRequest(t *testing.T) {
	b := appendStoreOffset(appendStreamHello(nil, purposeStoreOffset, "/", "s1"), "reader", 599)
	want := []byte{
		1, 4, // hello version, purposeStoreOffset
		0, 1, '/', // vhost
		0, 2, 's', '1', // stream
		0, 6, 'r', 'e', 'a', 'd', 'e', 'r', // reference
		0, 0, 0, 0, 0, 0, 2, 0x57, // offset 599
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("got % x, want % x", b, want)
	}
	r := bytes.NewReader(b)
	purpose, vhost, name, err := readStreamHello(r)
	if err != nil || purpose != purposeStoreOffset || vhost != "/" || name != "s1" {
		t.Fatalf("hello: %d %q %q %v", purpose, vhost, name, err)
	}
	ref, offset, err := readStoreOffset(r)
	if err != nil || ref != "reader" || offset != 599 {
		t.Fatalf("got %q %d %v, want reader 599", ref, offset, err)
	}
	if _, _, err := readStoreOffset(bytes.NewReader(b[len(b)-3:])); err == nil {
		t.Fatal("a truncated request read without an error")
	}
}
