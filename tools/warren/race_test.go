//go:build race

package main

// raceEnabled: the race detector's shadow memory swells the broker's RSS,
// so memory is not measured.
const raceEnabled = true
