package wireguard

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Resource name patterns of the Bigtable data API (google.bigtable.v2), as
// segments; "*" is one non-empty ID. A name matches only if it has exactly
// these segments, so an ID that happens to be "tables" is just an ID.
var (
	tablePattern            = []string{"projects", "*", "instances", "*", "tables", "*"}
	authorizedViewPattern   = []string{"projects", "*", "instances", "*", "tables", "*", "authorizedViews", "*"}
	materializedViewPattern = []string{"projects", "*", "instances", "*", "materializedViews", "*"}
)

// match reports whether name has exactly pattern's segments.
func match(name string, pattern []string) bool {
	segs := strings.Split(name, "/")
	if len(segs) != len(pattern) {
		return false
	}
	for i, p := range pattern {
		if p == "*" && segs[i] == "" || p != "*" && segs[i] != p {
			return false
		}
	}
	return true
}

// resource is what a request reads or writes: a table (named directly or
// through one of its authorized views) or a materialized view.
type resource struct {
	materialized bool   // a materialized view, not a table
	name         string // full name of the table or materialized view
	id           string // its last segment: the table or materialized view ID
}

func (r resource) String() string { return r.name }

// resolve classifies a request by its resource name fields, exactly: each
// set field must be a well-formed name of its kind, at least one must be
// set, and all set fields must name the same table (a table and one of its
// own authorized views do) or the same materialized view. The error says
// why a request cannot be classified.
func resolve(tableName, authorizedViewName, materializedViewName string) (resource, error) {
	var got []resource
	if tableName != "" {
		if !match(tableName, tablePattern) {
			return resource{}, fmt.Errorf("table_name %q is not projects/{project}/instances/{instance}/tables/{table}", tableName)
		}
		got = append(got, resource{name: tableName, id: tableName[strings.LastIndexByte(tableName, '/')+1:]})
	}
	if authorizedViewName != "" {
		if !match(authorizedViewName, authorizedViewPattern) {
			return resource{}, fmt.Errorf("authorized_view_name %q is not projects/{project}/instances/{instance}/tables/{table}/authorizedViews/{view}", authorizedViewName)
		}
		table := authorizedViewName[:strings.Index(authorizedViewName, "/authorizedViews/")]
		got = append(got, resource{name: table, id: table[strings.LastIndexByte(table, '/')+1:]})
	}
	if materializedViewName != "" {
		if !match(materializedViewName, materializedViewPattern) {
			return resource{}, fmt.Errorf("materialized_view_name %q is not projects/{project}/instances/{instance}/materializedViews/{view}", materializedViewName)
		}
		got = append(got, resource{materialized: true, name: materializedViewName, id: materializedViewName[strings.LastIndexByte(materializedViewName, '/')+1:]})
	}
	if len(got) == 0 {
		return resource{}, fmt.Errorf("the request names no table, authorized view or materialized view")
	}
	for _, r := range got[1:] {
		if r != got[0] {
			return resource{}, fmt.Errorf("the request names both %s and %s", got[0], r)
		}
	}
	return got[0], nil
}

// unknownFields lists the field numbers of m's top-level fields that the
// guard's copy of the protos does not know: a newer client could put a
// resource name there, so such requests cannot be classified.
func unknownFields(m proto.Message) []protowire.Number {
	b := m.ProtoReflect().GetUnknown()
	var nums []protowire.Number
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return append(nums, -1)
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return append(nums, num)
		}
		b = b[n:]
		nums = append(nums, num)
	}
	return nums
}
