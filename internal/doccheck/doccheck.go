package doccheck

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// Dead is one reference to a file or section that does not exist.
type Dead struct {
	File   string // slash-separated, relative to the root
	Line   int
	Target string // as written: path, path#anchor or #anchor
	Reason string
}

func (d Dead) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", d.File, d.Line, d.Target, d.Reason)
}

var (
	// mdLink is an inline markdown link or image: [text](target) or
	// [text](target "title").
	mdLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// mention is a path to a .md file, optionally with a #section, standing
	// on its own: at the start of a line or after a space, quote, backtick
	// or parenthesis (so URLs, whose paths follow "://", do not match).
	mention = regexp.MustCompile("(?:^|[\\s\"'`(\\[])((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+\\.md)(#[A-Za-z0-9_-]+)?")
	// explicitAnchor is an HTML anchor: <a id="x"> or <a name="x">.
	explicitAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	heading        = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineLink     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// Check scans every .md and .go file under root (skipping hidden
// directories, testdata and vendor) and returns the dead references, sorted
// by file and line.
func Check(root string) ([]Dead, error) {
	c := &checker{root: root, anchors: map[string]map[string]bool{}}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".md":
			return c.markdown(path)
		case ".go":
			return c.goFile(path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(c.dead, func(i, j int) bool {
		if c.dead[i].File != c.dead[j].File {
			return c.dead[i].File < c.dead[j].File
		}
		return c.dead[i].Line < c.dead[j].Line
	})
	return c.dead, nil
}

type checker struct {
	root    string
	anchors map[string]map[string]bool // absolute .md path -> its anchors
	dead    []Dead
}

// markdown checks the references of a Markdown file. Links are resolved
// relative to the file, as GitHub does, outside code fences; a plain mention
// of a .md file, anywhere, is resolved from the root first, then from the
// file's directory.
func (c *checker) markdown(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	rel := c.rel(path)
	dir := filepath.Dir(path)
	var fence fenceState
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		if fence.step(line) {
			c.mentions(rel, n, line, path, nil)
			continue
		}
		linked := map[string]bool{}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if isExternal(target) {
				continue
			}
			linked[target] = true
			if reason := c.resolve(target, []string{dir}, path); reason != "" {
				c.dead = append(c.dead, Dead{File: rel, Line: n, Target: target, Reason: reason})
			}
		}
		c.mentions(rel, n, line, path, linked)
	}
	return nil
}

// goFile checks the mentions of .md files in a Go file's comments (string
// literals are data, not references).
func (c *checker) goFile(path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	file := fset.AddFile(path, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	rel := c.rel(path)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return nil
		}
		if tok != token.COMMENT {
			continue
		}
		line := fset.Position(pos).Line
		for i, text := range strings.Split(lit, "\n") {
			c.mentions(rel, line+i, text, path, nil)
		}
	}
}

func (c *checker) rel(path string) string {
	rel, err := filepath.Rel(c.root, path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(rel)
}

// mentions checks the plain mentions of .md files in one line, skipping
// targets already checked as links.
func (c *checker) mentions(rel string, n int, line, path string, linked map[string]bool) {
	for _, m := range mention.FindAllStringSubmatch(line, -1) {
		target := m[1] + m[2]
		if linked[target] {
			continue
		}
		if reason := c.resolve(target, []string{c.root, filepath.Dir(path)}, path); reason != "" {
			c.dead = append(c.dead, Dead{File: rel, Line: n, Target: target, Reason: reason})
		}
	}
}

// fenceState follows CommonMark code fences: a line of three or more
// backticks (whose info string has none) or tildes, indented at most three
// spaces, opens one; a line of at least as many of the same character, and
// nothing else, closes it.
type fenceState struct {
	char byte
	n    int
}

// step reports whether line is inside a fence or is a fence line.
func (f *fenceState) step(line string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || t == "" || (t[0] != '`' && t[0] != '~') {
		return f.n > 0
	}
	ch := t[0]
	k := 0
	for k < len(t) && t[k] == ch {
		k++
	}
	rest := t[k:]
	switch {
	case f.n == 0 && k >= 3 && !(ch == '`' && strings.Contains(rest, "`")):
		f.char, f.n = ch, k
		return true
	case f.n > 0 && ch == f.char && k >= f.n && strings.TrimSpace(rest) == "":
		f.n = 0
		return true
	}
	return f.n > 0
}

func isExternal(target string) bool {
	return strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:")
}

// resolve returns why target is dead, or "" when it exists. The path part is
// tried against each base directory in turn; an empty path means self.
func (c *checker) resolve(target string, bases []string, self string) string {
	p, anchor, _ := strings.Cut(target, "#")
	file := self
	if p != "" {
		file = ""
		for _, base := range bases {
			cand := filepath.Join(base, filepath.FromSlash(p))
			if _, err := os.Stat(cand); err == nil {
				file = cand
				break
			}
		}
		if file == "" {
			return "no such file"
		}
	}
	if anchor == "" {
		return ""
	}
	if !strings.EqualFold(filepath.Ext(file), ".md") {
		return "an anchor on a file that is not Markdown"
	}
	anchors, err := c.anchorsOf(file)
	if err != nil {
		return err.Error()
	}
	if !anchors[anchor] {
		return fmt.Sprintf("no section #%s in %s", anchor, filepath.Base(file))
	}
	return ""
}

// anchorsOf lists the anchors of a Markdown file: its headings' slugs and
// its explicit anchors.
func (c *checker) anchorsOf(path string) (map[string]bool, error) {
	if a, ok := c.anchors[path]; ok {
		return a, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	a := Anchors(string(data))
	c.anchors[path] = a
	return a, nil
}

// Anchors returns the anchors a Markdown document defines, as GitHub
// renders it: one per heading outside code fences (repeats numbered -1,
// -2, ...) and one per <a id> or <a name>.
func Anchors(doc string) map[string]bool {
	a := map[string]bool{}
	seen := map[string]int{}
	var fence fenceState
	for _, line := range strings.Split(doc, "\n") {
		if fence.step(line) {
			continue
		}
		for _, m := range explicitAnchor.FindAllStringSubmatch(line, -1) {
			a[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			s := Slug(m[2])
			if k := seen[s]; k > 0 {
				a[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				a[s] = true
			}
			seen[s]++
		}
	}
	return a
}

// Slug is GitHub's anchor for a heading's text: link syntax reduced to its
// text, lowercased, every character but letters, digits, spaces, '-' and
// '_' dropped, spaces turned into '-'.
func Slug(text string) string {
	text = inlineLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
