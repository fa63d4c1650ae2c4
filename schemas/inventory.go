package schemas

import (
	"fmt"
	"time"
)

// The inventory table (bigtable.inventory) holds one row per identity, its
// key the identity's IdentityKey, with three columns in InventoryFamily:
// when the sensor was first seen, when it was last seen, and the start of
// its last reading's hour, each an RFC 3339 time in milliseconds.
//
// Every hour a batch or a stream builds writes the hour's earliest and
// latest reading to it, and nothing reads before it writes: each column
// keeps its extreme in the cells' timestamps. last_seen and last_hour are
// written at the reading's event time, first_seen at a reversed time
// (InventoryReverseMs minus the event time), so that the newest version of
// each column (Bigtable returns it first; the family keeps one, GC
// max_versions=1) is the latest last reading and the earliest first one,
// whatever order the writes land in. Writing the same hour again writes the
// same cells: the table is an idempotent maximum (and minimum).
const (
	InventoryFamily    = "inventory"
	InventoryFirstSeen = "first_seen"
	InventoryLastSeen  = "last_seen"
	InventoryLastHour  = "last_hour"
)

// InventoryReverseMs is the time first_seen's cell timestamps count back
// from: the millisecond after LatestEventTime.
var InventoryReverseMs = LatestEventTime.UnixMilli() + 1

// InventoryTable is the table spec of the spec's inventory (its one family
// kept at one version), and false when the spec names none.
func (s *Spec) InventoryTable() (TableSpec, bool) {
	if s.Bigtable.Inventory == "" {
		return TableSpec{}, false
	}
	return TableSpec{
		Name:     s.Bigtable.Inventory,
		RowKey:   "{identity}",
		Families: []FamilySpec{{Name: InventoryFamily, GC: &GCSpec{MaxVersions: 1}}},
	}, true
}

// InventoryEntry is one sensor's row of the inventory.
type InventoryEntry struct {
	// Identity is the row key: the identity's IdentityKey.
	Identity                            string
	FirstSeenMs, LastSeenMs, LastHourMs int64
}

// formatInventoryTime renders an inventory time: RFC 3339 in UTC, with
// milliseconds.
func formatInventoryTime(ms int64) []byte {
	return []byte(time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z"))
}

// InventoryRow is the inventory mutation of one identity's hour whose
// prepared readings are recs (in event-time order): its first and last
// reading. ok is false when the spec names no inventory or recs is empty.
// origin names the hour for a dead letter, should the write fail.
func (s *Spec) InventoryRow(recs []Record, origin Origin) (m RowMutation, ok bool) {
	if s.Bigtable.Inventory == "" || len(recs) == 0 {
		return RowMutation{}, false
	}
	first, last := recs[0].EventMs, recs[0].EventMs
	for i := range recs {
		first, last = min(first, recs[i].EventMs), max(last, recs[i].EventMs)
	}
	hour := WindowStart(last, time.Hour)
	cells := []Cell{
		{Family: InventoryFamily, Qualifier: InventoryFirstSeen, TsMicros: (InventoryReverseMs - first) * 1000, Value: formatInventoryTime(first)},
		{Family: InventoryFamily, Qualifier: InventoryLastSeen, TsMicros: last * 1000, Value: formatInventoryTime(last)},
		{Family: InventoryFamily, Qualifier: InventoryLastHour, TsMicros: last * 1000, Value: formatInventoryTime(hour)},
	}
	origin.Cells, origin.Deletes, origin.Kind = len(cells), 0, OriginRollup
	return RowMutation{Table: s.Bigtable.Inventory, RowKey: s.IdentityKey(&recs[0]), Cells: cells, Origins: []Origin{origin}}, true
}

// DecodeInventory reads one inventory row from its cells: of each column
// the newest version (the extreme, see above) counts. ok is false when the
// row has no last_seen.
func DecodeInventory(key string, cells []Cell) (e InventoryEntry, ok bool, err error) {
	e.Identity = key
	newest := map[string]int64{}
	for _, c := range cells {
		if c.Family != InventoryFamily {
			continue
		}
		if ts, seen := newest[c.Qualifier]; seen && ts >= c.TsMicros {
			continue
		}
		ms, perr := ParseTimestamp(string(c.Value))
		if perr != nil {
			return e, false, fmt.Errorf("inventory row %q: %s: %w", key, c.Qualifier, perr)
		}
		newest[c.Qualifier] = c.TsMicros
		switch c.Qualifier {
		case InventoryFirstSeen:
			e.FirstSeenMs = ms
		case InventoryLastSeen:
			e.LastSeenMs = ms
			ok = true
		case InventoryLastHour:
			e.LastHourMs = ms
		}
	}
	return e, ok, nil
}
