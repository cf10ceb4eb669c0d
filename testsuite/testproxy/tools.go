//go:build tools

// Package main's tools file keeps the conformance suite's test package in
// this module's build list, so run.sh can build its test binary with
// `go test -c` from the module proxy.
package main

import _ "github.com/googleapis/cloud-bigtable-clients-test/tests"
