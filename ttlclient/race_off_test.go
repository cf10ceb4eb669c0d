//go:build !race

package ttlclient_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
