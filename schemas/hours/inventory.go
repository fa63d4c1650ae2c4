package hours

import (
	"fmt"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/coverage"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
)

// withInventory adds to rows the inventory mutation of the hour's kept
// readings (a spec with bigtable.inventory): the sensor's first and last
// reading of the hour, which the table keeps as its first-seen minimum and
// last-seen maximum. Its dead letter, should the write fail, names the
// hour as the rollup's does.
func withInventory(c *Compiled, rows []RowMutation, rollup *Rollup, kept []schemas.Record) []RowMutation {
	if c.Bigtable.Inventory == "" || len(kept) == 0 {
		return rows
	}
	origin := Origin{Raw: c.Name + " inventory " + group.IdentityKey(c.Spec, &kept[0]), Source: "inventory:" + c.Bigtable.Inventory}
	if rollup != nil {
		origin = c.Roller().Origin(rollup)
	}
	if m, ok := InventoryRow(c.Spec, kept, origin); ok {
		rows = append(rows, m)
	}
	return rows
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
func InventoryRow(s *schemas.Spec, recs []schemas.Record, origin Origin) (m RowMutation, ok bool) {
	if s.Bigtable.Inventory == "" || len(recs) == 0 {
		return RowMutation{}, false
	}
	first, last := recs[0].EventMs, recs[0].EventMs
	for i := range recs {
		first, last = min(first, recs[i].EventMs), max(last, recs[i].EventMs)
	}
	hour := WindowStart(last, time.Hour)
	cells := []Cell{
		{Family: coverage.InventoryFamily, Qualifier: coverage.InventoryFirstSeen, TsMicros: (coverage.InventoryReverseMs - first) * 1000, Value: formatInventoryTime(first)},
		{Family: coverage.InventoryFamily, Qualifier: coverage.InventoryLastSeen, TsMicros: last * 1000, Value: formatInventoryTime(last)},
		{Family: coverage.InventoryFamily, Qualifier: coverage.InventoryLastHour, TsMicros: last * 1000, Value: formatInventoryTime(hour)},
	}
	origin.Cells, origin.Deletes, origin.Kind = len(cells), 0, OriginRollup
	return RowMutation{Table: s.Bigtable.Inventory, RowKey: group.IdentityKey(s, &recs[0]), Cells: cells, Origins: []Origin{origin}}, true
}

// DecodeInventory reads one inventory row from its cells: of each column
// the newest version (the extreme, see above) counts. ok is false when the
// row has no last_seen.
func DecodeInventory(key string, cells []Cell) (e InventoryEntry, ok bool, err error) {
	e.Identity = key
	newest := map[string]int64{}
	for _, c := range cells {
		if c.Family != coverage.InventoryFamily {
			continue
		}
		if ts, seen := newest[c.Qualifier]; seen && ts >= c.TsMicros {
			continue
		}
		ms, perr := timestamps.ParseTimestamp(string(c.Value))
		if perr != nil {
			return e, false, fmt.Errorf("inventory row %q: %s: %w", key, c.Qualifier, perr)
		}
		newest[c.Qualifier] = c.TsMicros
		switch c.Qualifier {
		case coverage.InventoryFirstSeen:
			e.FirstSeenMs = ms
		case coverage.InventoryLastSeen:
			e.LastSeenMs = ms
			ok = true
		case coverage.InventoryLastHour:
			e.LastHourMs = ms
		}
	}
	return e, ok, nil
}
