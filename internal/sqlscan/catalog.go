package sqlscan

import (
	"sort"
	"sync"
)

// Catalog remembers the managed families of every table and view a client
// opened, to judge the queries it prepares. A name remembered twice keeps
// every family either time called managed. Its zero value is empty and
// ready; it is safe for concurrent use.
type Catalog struct {
	mu      sync.RWMutex
	managed map[string]map[string]bool
}

// Remember records name (a table or view) with its managed families.
func (c *Catalog) Remember(name string, managed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.managed == nil {
		c.managed = make(map[string]map[string]bool)
	}
	fams := c.managed[name]
	if fams == nil {
		fams = make(map[string]bool)
		c.managed[name] = fams
	}
	for _, fam := range managed {
		fams[fam] = true
	}
}

// Finding is why a query may not be sent: it reads Table, whose managed
// families are Families (sorted), or, Unknown, it reads a table not
// remembered or could not be classified (Table "" then, and Reason says
// why).
type Finding struct {
	Table    string
	Families []string
	Reason   string
	Unknown  bool
}

// Check is nil when every table query reads is remembered and has no
// managed family, else the finding about the first that is not.
func (c *Catalog) Check(query string) *Finding {
	tables, err := Tables(query)
	if err != nil {
		return &Finding{Reason: err.Error(), Unknown: true}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, table := range tables {
		fams, ok := c.managed[table]
		if !ok {
			return &Finding{Table: table, Reason: "its schema is unknown: this client has not opened it", Unknown: true}
		}
		if len(fams) > 0 {
			names := make([]string, 0, len(fams))
			for fam := range fams {
				names = append(names, fam)
			}
			sort.Strings(names)
			return &Finding{Table: table, Families: names}
		}
	}
	return nil
}
