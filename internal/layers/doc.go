// Package layers holds the test that keeps Warren's imports going
// downwards (README, Layout): a package may import the packages below it,
// never one above it or beside it at its level.
package layers
