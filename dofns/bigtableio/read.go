package bigtableio

import (
	"context"
	"math"
	"strings"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio/filters"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// Reader reads rows of an instance's tables back: the core's read-back
// of stored readings (dofns.TableReader, wired by package pipelines).
type Reader struct {
	client *bigtable.Client
}

// OpenReader opens a Reader of project/instance.
func OpenReader(ctx context.Context, project, instance string) (*Reader, error) {
	c, err := NewClient(ctx, project, instance)
	if err != nil {
		return nil, err
	}
	return &Reader{client: c}, nil
}

// ReadRows calls row for each row of table within ranges, with those of
// its cells that are in one of families and whose timestamps are in
// [fromMs, toMs) (toMs math.MaxInt64: no end). With no bound (fromMs 0,
// toMs math.MaxInt64) it asks for no timestamp range: the callers
// (hours.ReadBack) bound the readings' times themselves, and the Bigtable
// emulator would filter every cell once more. It makes one attempt.
func (r *Reader) ReadRows(ctx context.Context, table string, ranges []rowkey.RowRange, families []string, fromMs, toMs int64, row func(hours.ReadRow)) error {
	return r.readRows(ctx, table, ranges, families, fromMs, toMs, func(rr hours.ReadRow) bool {
		row(rr)
		return true
	})
}

// readRows is ReadRows whose row callback may stop the read by returning
// false.
func (r *Reader) readRows(ctx context.Context, table string, ranges []rowkey.RowRange, families []string, fromMs, toMs int64, row func(hours.ReadRow) bool) error {
	var rl bigtable.RowRangeList
	for _, rg := range ranges {
		rl = append(rl, bigtable.NewRange(rg.Start, rg.End))
	}
	filter := filters.Families(families)
	if fromMs != 0 || toMs != math.MaxInt64 {
		end := bigtable.Timestamp(0) // no end
		if toMs != math.MaxInt64 {
			end = bigtable.Timestamp(toMs * 1000)
		}
		filter = bigtable.ChainFilters(filter, bigtable.TimestampRangeFilterMicros(bigtable.Timestamp(fromMs*1000), end))
	}
	return r.client.Open(table).ReadRows(ctx, rl, func(br bigtable.Row) bool {
		rr := hours.ReadRow{Key: br.Key()}
		for fam, items := range br {
			for _, it := range items {
				rr.Cells = append(rr.Cells, hours.Cell{Family: fam, Qualifier: strings.TrimPrefix(it.Column, fam+":"),
					TsMicros: int64(it.Timestamp), Value: it.Value})
			}
		}
		return row(rr)
	}, bigtable.RowFilter(filter))
}

// Close closes the client.
func (r *Reader) Close() error { return r.client.Close() }

// SampleRowKeys is Bigtable's sample of table's row keys: keys that end
// chunks of about equal size, the table's last key among them.
func (r *Reader) SampleRowKeys(ctx context.Context, table string) ([]string, error) {
	return r.client.Open(table).SampleRowKeys(ctx)
}

// RowKeys calls key with each row key of table in [start, end) (end "":
// to the table's end), in key order, reading one cell of each row with
// its value stripped. It makes one attempt.
func (r *Reader) RowKeys(ctx context.Context, table, start, end string, key func(string)) error {
	filter := bigtable.ChainFilters(bigtable.CellsPerRowLimitFilter(1), bigtable.StripValueFilter())
	return r.client.Open(table).ReadRows(ctx, bigtable.NewRange(start, end), func(row bigtable.Row) bool {
		key(row.Key())
		return true
	}, bigtable.RowFilter(filter))
}
