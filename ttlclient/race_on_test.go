//go:build race

package ttlclient_test

// raceEnabled: the test binary runs under the race detector, where
// sync.Pool drops a quarter of what is put back (sync/pool.go, Put), so
// pooled scratch is allocated anew on a quarter of the builds.
const raceEnabled = true
