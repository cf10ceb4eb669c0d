package doccheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoDeadDocReferences is the check CI runs: every link and every
// mention of a .md file (and section) in the repository must resolve.
func TestNoDeadDocReferences(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"), "the repository root")
	dead, err := Check(root)
	require.NoError(t, err)
	for _, d := range dead {
		t.Errorf("dead reference: %s", d)
	}
}

// TestCheckFindsEachKindOfDeadReference plants dead and live references in
// a small tree, so a checker that finds nothing cannot pass.
func TestCheckFindsEachKindOfDeadReference(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("docs/design.md", "# Design\n\n<a id=\"guardrails\"></a>\n## Guard rails: the `refusals`\n\n## Same\n## Same\n\n```text\n## Not a heading\n```\n")
	write("README.md", "See [design](docs/design.md#guardrails), [again](docs/design.md#guard-rails-the-refusals),\n"+
		"[repeat](docs/design.md#same-1), [web](https://example.com/x.md#y), [self](#readme).\n"+
		"# Readme\n"+
		"Dead: [gone](docs/gone.md), [no section](docs/design.md#nope), [self](#missing).\n"+
		"Inline code opens no fence: ```` ```go ```` and [after it](docs/after.md).\n"+
		"```sh\ncat [not a link](nowhere.md)\n```\n")
	write("docs/other.md", "[up](../README.md#readme) [side](design.md#same) [dead side](design.md#not-here)\n")
	// The old design note's name, spelled so that this file does not cite it.
	oldNote := "DESIGN" + ".md"
	write("pkg/a.go", "package pkg\n\n// See docs/design.md#guardrails and README.md.\n// Dead: "+oldNote+" section 2, docs/design.md#section-2.\n"+
		"var s = \"gone.md is data, not a reference\"\n")
	write(".hidden/x.md", "[ignored](nowhere.md)\n")
	write("pkg/testdata/y.md", "[ignored](nowhere.md)\n")

	dead, err := Check(root)
	require.NoError(t, err)
	var got []string
	for _, d := range dead {
		got = append(got, d.File+":"+d.Target)
	}
	assert.Equal(t, []string{
		"README.md:docs/gone.md",
		"README.md:docs/design.md#nope",
		"README.md:#missing",
		"README.md:docs/after.md",
		"README.md:nowhere.md", // a mention inside a fence is still a mention
		"docs/other.md:design.md#not-here",
		"pkg/a.go:" + oldNote,
		"pkg/a.go:docs/design.md#section-2",
	}, got)
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Guardrails and the wire guard": "guardrails-and-the-wire-guard",
		"The `bttl` command":            "the-bttl-command",
		"Metrics and shadow reads":      "metrics-and-shadow-reads",
		"What's new? (v1.2)":            "whats-new-v12",
		"A [link](x.md) in a heading":   "a-link-in-a-heading",
		"snake_case and kebab-case":     "snake_case-and-kebab-case",
		"  Trailing spaces  ":           "trailing-spaces",
		"Moving from the raw client":    "moving-from-the-raw-client",
		"Authentication and IAM":        "authentication-and-iam",
		"Guarantees & limits":           "guarantees--limits",
	} {
		assert.Equal(t, want, Slug(in), "Slug(%q)", in)
	}
}
