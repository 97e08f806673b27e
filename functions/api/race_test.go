//go:build race

package main

// raceFlags: the tests run with -race, so the gateway they start is built
// with it too (and shares their build cache).
var raceFlags = []string{"-race"}
