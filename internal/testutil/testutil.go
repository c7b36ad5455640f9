// Package testutil holds helpers that the tests of several packages
// share: the crash tests' seeds and child-process output, and the codec
// tests' annotated hex.
package testutil

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// LockedBuffer is a bytes.Buffer that goroutines may write concurrently:
// a child process's stderr, a logger shared by a broker's goroutines.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Seed returns the seed of a randomized test: the value of the
// environment variable env when it is set, else the clock. It logs how
// to rerun the test with the same seed.
func Seed(t testing.TB, env string) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(env); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (rerun with %s=%d)", seed, env, seed)
	return seed
}
