package testutil

import "strconv"

// Keys returns n distinct keys: prefix followed by 0, 1, … n-1, for
// tests that spread keys over a hash.
func Keys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	return keys
}
