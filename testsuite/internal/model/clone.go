package model

// Clone is a copy of the whole model: later changes to either do not reach
// the other. The replicated slice of the matrix keeps one per write, each
// the state a lagging cluster holds once that write reached it.
func (m *Model) Clone() *Model {
	c := &Model{fams: m.fams, rows: make(map[string]row, len(m.rows)), idle: m.idle, sem: m.sem}
	for k, r := range m.rows {
		c.rows[k] = r.clone()
	}
	return c
}
