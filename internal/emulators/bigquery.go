package emulators

import (
	"context"
	"errors"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"
)

// ReadBigQuery reads every row of tbl (on the BigQuery emulator, or
// BigQuery itself) with tables.list data, as column -> value maps. It is
// the BigQuery twin of DumpBigtable; the error (say, a table not created
// yet) is the caller's to judge.
func ReadBigQuery(ctx context.Context, tbl *bigquery.Table) ([]map[string]bigquery.Value, error) {
	var rows []map[string]bigquery.Value
	it := tbl.Read(ctx)
	for {
		var row map[string]bigquery.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
}
