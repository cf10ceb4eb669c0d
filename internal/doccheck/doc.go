// Package doccheck finds references to documentation that does not exist:
// markdown links to missing files or headings, and mentions of a .md file
// (with or without a #section) in Markdown and Go sources. Its test scans
// the whole repository, so `go test ./...` (and CI) fails on a dead
// reference, listing each one with its file and line.
//
// Anchors resolve as GitHub renders them: a heading's text lowercased,
// punctuation dropped, spaces turned into '-', with -1, -2, ... for repeated
// headings; explicit <a id="..."> or <a name="..."> anchors count too.
package doccheck
