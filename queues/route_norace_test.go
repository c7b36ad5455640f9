//go:build !race

package queues

const raceEnabled = false
