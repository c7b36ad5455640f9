package wire

import "testing"

// Ensure the versions table names each command once, never a response,
// with 1 <= min <= max.
func TestServerCommandVersions(t *testing.T) {
	seen := map[uint16]bool{}
	for _, v := range ServerCommandVersions {
		key, lo, hi := v[0], v[1], v[2]
		if seen[key] {
			t.Errorf("key %#04x listed twice", key)
		}
		seen[key] = true
		if key == 0 || key&uint16(ResponseBit) != 0 || key > uint16(KeyResolveOffsetSpec) {
			t.Errorf("key %#04x is not a command key", key)
		}
		if lo < 1 || lo > hi {
			t.Errorf("key %#04x: versions %d..%d", key, lo, hi)
		}
	}
}
