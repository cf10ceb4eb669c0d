package schemafile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The file is first read into a tree of nodes, the same for YAML and JSON,
// with each node's position; build then gives it meaning. Both readers are
// strict where the libraries are lenient: duplicate keys, a second YAML
// document and trailing JSON data are errors, and scalars keep the text
// written so that integers can be checked digit by digit.

type nodeKind uint8

const (
	kindMap nodeKind = iota
	kindList
	kindString
	kindNumber
	kindBool
	kindNull
)

func (k nodeKind) String() string {
	return [...]string{"a mapping", "a list", "a string", "a number", "a boolean", "null"}[k]
}

type pos struct {
	line, col int
	off       int64 // JSON only; -1 for YAML
}

type node struct {
	kind    nodeKind
	text    string // a scalar as written (JSON strings unescaped)
	at      pos
	entries []entry // kindMap, in file order, keys unique
}

type entry struct {
	key string
	at  pos // of the key
	val *node
}

// errAt is a *Error at p, the rest filled in by the caller.
func errAt(p pos, err error) *Error {
	return &Error{Line: p.line, Column: p.col, Offset: p.off, Err: err}
}

// inPath names the table and family that path (the keys leading to the
// mapping where e was found) is in.
func inPath(path []string, e *Error) *Error {
	if len(path) >= 2 && path[0] == "tables" {
		e.Table = path[1]
	}
	if len(path) >= 3 && path[0] == "tables" {
		e.Family = path[2]
	}
	return e
}

// Limits that keep a hostile file from costing much: a schema file nests
// four levels deep, and aliases must not multiply the work.
const (
	maxDepth = 16
	maxNodes = 1 << 20
)

var errTooLarge = fmt.Errorf("more than %d nodes (after expanding aliases) or nested deeper than %d", maxNodes, maxDepth)

// ---- YAML ----

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

func readYAML(data []byte) (*node, *Error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, yamlSyntax(err)
	}
	var second yaml.Node
	switch err := dec.Decode(&second); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlSyntax(err)
	default:
		return nil, errAt(pos{line: second.Line, col: second.Column, off: -1},
			errors.New("a second YAML document (after ---): a schema file holds exactly one"))
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	c := &yamlConverter{}
	return c.convert(doc.Content[0], 0)
}

// yamlSyntax turns "yaml: line 3: message" into an error at line 3.
func yamlSyntax(err error) *Error {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	return &Error{Line: line, Offset: -1, Err: fmt.Errorf("YAML syntax: %s", msg)}
}

type yamlConverter struct {
	nodes int
	path  []string // keys of the mappings being converted
}

func (c *yamlConverter) convert(n *yaml.Node, depth int) (*node, *Error) {
	for hops := 0; n.Kind == yaml.AliasNode; hops++ {
		if n.Alias == nil || hops > maxDepth {
			return nil, errAt(yamlPos(n), errors.New("unresolvable alias"))
		}
		n = n.Alias
	}
	c.nodes++
	if c.nodes > maxNodes || depth > maxDepth {
		return nil, errAt(yamlPos(n), errTooLarge)
	}
	out := &node{at: yamlPos(n), text: n.Value}
	switch n.Kind {
	case yaml.MappingNode:
		out.kind = kindMap
		entries, err := c.mapping(n, depth)
		if err != nil {
			return nil, err
		}
		out.entries = entries
	case yaml.SequenceNode:
		out.kind = kindList
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!timestamp":
			out.kind = kindString
		case "!!int", "!!float":
			out.kind = kindNumber
		case "!!bool":
			out.kind = kindBool
		case "!!null":
			out.kind = kindNull
		default:
			return nil, errAt(out.at, fmt.Errorf("unsupported tag %s", n.Tag))
		}
	default:
		return nil, errAt(out.at, errors.New("unsupported YAML node"))
	}
	return out, nil
}

// mapping lists a mapping's entries: keys must be scalars and unique;
// merge keys (<<) add the merged mappings' entries that are not written
// out, earlier merged mappings first, as YAML specifies.
func (c *yamlConverter) mapping(n *yaml.Node, depth int) ([]entry, *Error) {
	var entries []entry
	seen := map[string]pos{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return nil, errAt(yamlPos(k), errors.New("a key must be a plain string"))
		}
		at := yamlPos(k)
		if first, dup := seen[k.Value]; dup {
			return nil, inPath(c.path, &Error{Line: at.line, Column: at.col, Offset: -1, Key: k.Value,
				Err: fmt.Errorf("duplicate key (first at line %d, column %d)", first.line, first.col)})
		}
		seen[k.Value] = at
		c.path = append(c.path, k.Value)
		val, err := c.convert(v, depth+1)
		c.path = c.path[:len(c.path)-1]
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{key: k.Value, at: at, val: val})
	}
	for _, m := range merges {
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			mn, err := c.convert(src, depth+1)
			if err != nil {
				return nil, err
			}
			if mn.kind != kindMap {
				return nil, errAt(mn.at, fmt.Errorf("a merge key (<<) takes a mapping or a list of mappings, not %s", mn.kind))
			}
			for _, e := range mn.entries {
				if _, ok := seen[e.key]; !ok {
					seen[e.key] = e.at
					entries = append(entries, e)
				}
			}
		}
	}
	return entries, nil
}

func yamlPos(n *yaml.Node) pos { return pos{line: n.Line, col: n.Column, off: -1} }

// ---- JSON ----

type jsonReader struct {
	data  []byte
	dec   *json.Decoder
	nodes int
	path  []string // keys of the objects being read
}

func readJSON(data []byte) (*node, *Error) {
	r := &jsonReader{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	r.dec.UseNumber()
	if len(bytes.TrimLeft(data, " \t\r\n")) == 0 {
		return nil, nil
	}
	root, err := r.value(0)
	if err != nil {
		return nil, err
	}
	at := r.next()
	if _, terr := r.dec.Token(); !errors.Is(terr, io.EOF) {
		if terr != nil {
			return nil, r.syntax(terr)
		}
		return nil, errAt(at, errors.New("data after the schema's closing brace"))
	}
	return root, nil
}

// next is the position of the next token: the decoder's offset past
// whitespace and the separators it consumes with the token.
func (r *jsonReader) next() pos {
	off := r.dec.InputOffset()
	for off < int64(len(r.data)) && strings.IndexByte(" \t\r\n,:", r.data[off]) >= 0 {
		off++
	}
	return r.pos(off)
}

func (r *jsonReader) pos(off int64) pos {
	before := r.data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return pos{line: line, col: col, off: off}
}

// syntax places a decoder error at the start of the token it could not
// read: the offsets in json.SyntaxError count from the start of the value
// being decoded, not always from the start of the input.
func (r *jsonReader) syntax(err error) *Error {
	msg := err.Error()
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		msg = "unexpected end of input"
	}
	return errAt(r.next(), fmt.Errorf("JSON syntax: %s", msg))
}

func (r *jsonReader) value(depth int) (*node, *Error) {
	at := r.next()
	r.nodes++
	if r.nodes > maxNodes || depth > maxDepth {
		return nil, errAt(at, errTooLarge)
	}
	tok, err := r.dec.Token()
	if err != nil {
		return nil, r.syntax(err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			for r.dec.More() {
				if _, err := r.value(depth + 1); err != nil {
					return nil, err
				}
			}
			if _, err := r.dec.Token(); err != nil {
				return nil, r.syntax(err)
			}
			return &node{kind: kindList, at: at}, nil
		}
		out := &node{kind: kindMap, at: at}
		seen := map[string]pos{}
		for r.dec.More() {
			kat := r.next()
			ktok, err := r.dec.Token()
			if err != nil {
				return nil, r.syntax(err)
			}
			key, ok := ktok.(string)
			if !ok {
				return nil, errAt(kat, errors.New("JSON syntax: want a key"))
			}
			if first, dup := seen[key]; dup {
				return nil, inPath(r.path, &Error{Line: kat.line, Column: kat.col, Offset: kat.off, Key: key,
					Err: fmt.Errorf("duplicate key (first at byte offset %d)", first.off)})
			}
			seen[key] = kat
			r.path = append(r.path, key)
			val, verr := r.value(depth + 1)
			r.path = r.path[:len(r.path)-1]
			if verr != nil {
				return nil, verr
			}
			out.entries = append(out.entries, entry{key: key, at: kat, val: val})
		}
		if _, err := r.dec.Token(); err != nil {
			return nil, r.syntax(err)
		}
		return out, nil
	case string:
		return &node{kind: kindString, text: t, at: at}, nil
	case json.Number:
		return &node{kind: kindNumber, text: string(t), at: at}, nil
	case bool:
		return &node{kind: kindBool, text: strconv.FormatBool(t), at: at}, nil
	case nil:
		return &node{kind: kindNull, text: "null", at: at}, nil
	}
	return nil, errAt(at, fmt.Errorf("JSON syntax: unexpected %v", tok))
}
