package bigtableio

import (
	"context"
	"math"
	"regexp"
	"strings"

	"cloud.google.com/go/bigtable"

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
// [fromMs, toMs) (toMs math.MaxInt64: no end). It makes one attempt.
func (r *Reader) ReadRows(ctx context.Context, table string, ranges []rowkey.RowRange, families []string, fromMs, toMs int64, row func(hours.ReadRow)) error {
	var rl bigtable.RowRangeList
	for _, rg := range ranges {
		rl = append(rl, bigtable.NewRange(rg.Start, rg.End))
	}
	quoted := make([]string, len(families))
	for i, f := range families {
		quoted[i] = regexp.QuoteMeta(f)
	}
	end := bigtable.Timestamp(0) // no end
	if toMs != math.MaxInt64 {
		end = bigtable.Timestamp(toMs * 1000)
	}
	filter := bigtable.ChainFilters(bigtable.FamilyFilter("^("+strings.Join(quoted, "|")+")$"),
		bigtable.TimestampRangeFilterMicros(bigtable.Timestamp(fromMs*1000), end))
	return r.client.Open(table).ReadRows(ctx, rl, func(br bigtable.Row) bool {
		rr := hours.ReadRow{Key: br.Key()}
		for fam, items := range br {
			for _, it := range items {
				rr.Cells = append(rr.Cells, hours.Cell{Family: fam, Qualifier: strings.TrimPrefix(it.Column, fam+":"),
					TsMicros: int64(it.Timestamp), Value: it.Value})
			}
		}
		row(rr)
		return true
	}, bigtable.RowFilter(filter))
}

// Close closes the client.
func (r *Reader) Close() error { return r.client.Close() }
