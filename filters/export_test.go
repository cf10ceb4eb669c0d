package filters

// RowMoveBytes is the size Add counts for m's predicate: its elements and
// the slack for the wrappers around them.
func RowMoveBytes(m *RowMove) int { return m.pinN + m.slotN + rowMoveSlack }
