//go:build race

package queues

// raceEnabled: sync.Pool drops pooled items at random under the race
// detector, so allocation counts are not asserted.
const raceEnabled = true
