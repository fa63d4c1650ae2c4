package coverage

import "github.com/sensorpipe/sensorpipe/schemas"

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
var InventoryReverseMs = schemas.LatestEventTime.UnixMilli() + 1

// InventoryTable is the table spec of the spec's inventory (its one family
// kept at one version), and false when the spec names none.
func InventoryTable(s *schemas.Spec) (schemas.TableSpec, bool) {
	if s.Bigtable.Inventory == "" {
		return schemas.TableSpec{}, false
	}
	return schemas.TableSpec{
		Name:     s.Bigtable.Inventory,
		RowKey:   "{identity}",
		Families: []schemas.FamilySpec{{Name: InventoryFamily, GC: &schemas.GCSpec{MaxVersions: 1}}},
	}, true
}
