package main

import (
	"bytes"
	"log"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withCBTRC points HOME at a directory whose .cbtrc holds content.
func withCBTRC(t *testing.T, content string) string {
	t.Helper()
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, ".cbtrc"), []byte(content), 0o600))
	t.Setenv("HOME", home)
	return filepath.Join(home, ".cbtrc")
}

// project and instance come from ~/.cbtrc as cbt reads them; flags win
// over it.
func TestCBTRCGivesProjectAndInstance(t *testing.T) {
	_, _, addr := newServer(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	schema := writeFile(t, "s.yaml", "tables:\n  events:\n    clicks: {strategy: unmanaged}\n")

	withCBTRC(t, "project = p\n\ninstance = i\ntimeout = 5s\n")
	r := runRaw(t.Context(), "-schema", schema, "verify")
	assert.Equal(t, exitFindings, r.code, "verify ran against the instance (table missing is a finding): %s", r.stderr)
	assert.Contains(t, r.stdout+r.stderr, "events")

	// A flag overrides the file, even set to nothing.
	withCBTRC(t, "project = p\ninstance = i\n")
	r = runRaw(t.Context(), "-schema", schema, "-instance", "", "verify")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "-project and -instance are required")
}

func TestCBTRCBadFilesExitTwoNamingTheLine(t *testing.T) {
	schema := writeFile(t, "s.yaml", "tables:\n  events:\n    clicks: {strategy: unmanaged}\n")
	for content, want := range map[string]string{
		"project = p\ninstance\n":                               ".cbtrc:2: want key = value",
		"project = p\ncolour = blue\n":                          `.cbtrc:2: unknown key "colour"`,
		"auth-token = secret\n":                                 ".cbtrc:1: auth-token is not supported by bttl",
		"project = p\ntimeout = soon\n":                         `timeout = "soon"`,
		"project = p\ninstance = i\ncert-file = /nonexistent\n": "cert-file in ",
	} {
		withCBTRC(t, content)
		t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1")
		r := runRaw(t.Context(), "-schema", schema, "verify")
		assert.Equal(t, exitError, r.code, "%q", content)
		assert.Contains(t, r.stderr, want, "%q", content)
	}
	// Help never reads the file.
	withCBTRC(t, "colour = blue\n")
	assert.Equal(t, exitOK, runRaw(t.Context(), "verify", "-h").code)
}

func TestEndpointNamesTheFlags(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	g := newGlobals()
	assert.Equal(t, "bigtable.googleapis.com:443 / bigtableadmin.googleapis.com:443", endpointOf(g))
	g.dataEndpoint, g.adminEndpoint = "data.example:443", "admin.example:443"
	assert.Equal(t, "data.example:443 (-data-endpoint) / admin.example:443 (-admin-endpoint)", endpointOf(g))
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:9")
	assert.Equal(t, "127.0.0.1:9 (BIGTABLE_EMULATOR_HOST)", endpointOf(g))
}

// A library error under a flag's name is printed with one "bttl" prefix.
func TestUsageErrorsHaveOnePrefix(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1")
	t.Setenv("HOME", t.TempDir())
	schema := writeFile(t, "s.yaml", "tables:\n  events:\n    clicks: {strategy: nonsense}\n")
	r := runRaw(t.Context(), "-project", "p", "-instance", "i", "-schema", schema, "verify")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "bttl verify: -schema: invalid schema file")
	assert.NotContains(t, r.stderr, ": bttl: ")
}

// The command leaves the process's standard logger alone (it discarded it
// to quiet an embedded emulator, hiding the bigtable client's warnings).
func TestCommandLeavesTheStandardLoggerAlone(t *testing.T) {
	_, _, addr := newServer(t)
	var buf bytes.Buffer
	prev := log.Writer()
	log.SetOutput(&buf)
	t.Cleanup(func() { log.SetOutput(prev) })
	schema := writeFile(t, "s.yaml", "tables:\n  events:\n    clicks: {strategy: unmanaged}\n")
	bttl(t, addr, "", "-schema", schema, "verify")
	assert.Same(t, &buf, log.Writer())
}

// Creds and timeout given by ~/.cbtrc failed or capped a command while the
// message named the flag. It names the file (issue 35 item 6).
func TestCBTRCValuesNameTheFile(t *testing.T) {
	schema := writeFile(t, "s.yaml", "tables:\n  events:\n    clicks: {strategy: unmanaged}\n")
	path := withCBTRC(t, "project = p\ninstance = i\ncreds = /nonexistent/key.json\n")
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1")
	r := runRaw(t.Context(), "-schema", schema, "verify")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "creds in "+path+": ")

	// A server that takes the connection and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	t.Setenv("BIGTABLE_EMULATOR_HOST", ln.Addr().String())
	path = withCBTRC(t, "project = p\ninstance = i\ntimeout = 300ms\n")
	r = runRaw(t.Context(), "-schema", schema, "audit")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "not finished within 300ms (timeout in "+path+")", r.stderr)
}
