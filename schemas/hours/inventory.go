package hours

import (
	"github.com/sensorpipe/sensorpipe/schemas"
)

// withInventory adds to rows the inventory mutation of the hour's kept
// readings (a spec with bigtable.inventory): the sensor's first and last
// reading of the hour, which the table keeps as its first-seen minimum and
// last-seen maximum. Its dead letter, should the write fail, names the
// hour as the rollup's does.
func withInventory(c *schemas.Compiled, rows []schemas.RowMutation, rollup *schemas.Rollup, kept []schemas.Record) []schemas.RowMutation {
	if c.Bigtable.Inventory == "" || len(kept) == 0 {
		return rows
	}
	origin := schemas.Origin{Raw: c.Name + " inventory " + c.IdentityKey(&kept[0]), Source: "inventory:" + c.Bigtable.Inventory}
	if rollup != nil {
		origin = c.Roller().Origin(rollup)
	}
	if m, ok := c.InventoryRow(kept, origin); ok {
		rows = append(rows, m)
	}
	return rows
}
