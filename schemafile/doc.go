// Package schemafile reads the schemas of several tables from a JSON or
// YAML file, the format the bttl command takes:
//
//	tables:
//	  events:                        # table ID
//	    session:                     # column family
//	      strategy: one-second       # one-second | default-expiry | sequence | unmanaged
//	      default_ttl: 30m           # optional: TTL of cells written without one
//	      idle_ttl: 30m              # optional (age strategies): time-to-idle, a read keeps the cell alive
//	      idle_debounce: 0.1         # optional: refresh once less than (1-0.1)*idle_ttl remains
//	    clicks:
//	      strategy: default-expiry
//	      ttl: 2d                    # required: the default TTL D (the GC max age)
//	      max_versions: 3            # optional: union with max versions (age strategies)
//	      single_value: true         # optional: a write replaces the column's older cells
//	      max_ttl: 30d               # optional: longer TTLs are refused (age strategies)
//	      clamp_ttl: true            # optional, with max_ttl: lower a longer TTL to it instead
//	      write_time: true           # optional: record each cell's real write time
//	    doc:
//	      strategy: sequence
//	      versions: 5                # required: N versions kept (the GC max versions)
//	    meta:
//	      strategy: unmanaged
//	    "*":                         # optional: every family not named above
//	      strategy: unmanaged        # passes as unmanaged (the only strategy allowed)
//
// Without "*" a family the schema does not name is refused by ttlclient and
// the wire guard (the default); with it, LoadTables and ParseTables return
// the policy in Table.Unlisted, for ttlclient.WithUnlistedFamilies and
// wireguard.WithUnlistedFamilies. Load and Parse return the schemas alone.
//
// The same in JSON: {"tables": {"events": {"session": {"strategy": "one-second"}}}}.
//
// The file is read strictly, so that it cannot mean something other than
// what it says; in particular a typo cannot silently drop an option:
//
//   - Unknown keys are errors, and keys are case-sensitive ("Strategy" is
//     refused, with a hint).
//   - A key may appear once per mapping (YAML and JSON alike).
//   - A YAML file holds one document (a second "---" document is an error);
//     a JSON file holds one object (anything after it is an error). An empty
//     file is an error. YAML anchors, aliases and merge keys (<<) work.
//   - versions and max_versions are whole decimal numbers from 1 to
//     2147483647 (Bigtable's limit): 2.9, 1e3, 0x10 and "5" are refused, and
//     so is a leading zero (017), which YAML 1.1 reads as octal.
//   - Durations are Go durations ("90s", "1h30m", "1500ms") with days and
//     weeks as further units, in any combination ("7d", "1d12h", "2w",
//     "1w2d3h"); they must be positive.
//   - Table IDs follow Bigtable's rule: [_a-zA-Z0-9][-_.a-zA-Z0-9]*, at most
//     50 characters. Family names: [-_.a-zA-Z0-9]+, at most 64 characters.
//   - single_value, clamp_ttl and write_time are true or false (not yes/no).
//   - idle_debounce is a plain decimal fraction of idle_ttl in [0, 1)
//     (0.1, .25, 0): no sign, exponent, NaN or duration, and only with
//     idle_ttl.
//
// Every error from Load and Parse is a *Error wrapping ErrInvalidFile: it
// names the file, the position (line and column; for JSON the byte offset
// too), and the table, family and key concerned. Errors about a policy wrap
// strategy.ErrInvalidPolicy as well.
package schemafile
