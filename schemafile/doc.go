// Package schemafile reads the schemas of several tables from a JSON or
// YAML file, the format the bttl command takes:
//
//	tables:
//	  events:                        # table ID
//	    session:                     # column family
//	      strategy: one-second       # one-second | default-expiry | sequence | unmanaged
//	      default_ttl: 30m           # optional: TTL of cells written without one
//	    clicks:
//	      strategy: default-expiry
//	      ttl: 48h                   # required: the default TTL D (the GC max age)
//	      max_versions: 3            # optional: union with max versions (age strategies)
//	      single_value: true         # optional: a write replaces the column's older cells
//	    doc:
//	      strategy: sequence
//	      versions: 5                # required: N versions kept (the GC max versions)
//	    meta:
//	      strategy: unmanaged
//
// The same in JSON: {"tables": {"events": {"session": {"strategy": "one-second"}}}}.
// Durations are Go durations ("90s", "1h30m", "1500ms") or whole days
// ("7d"). Unknown keys are errors, so a typo cannot silently drop an option.
package schemafile
