// Package rowkey works with the keys a spec's templates make: it renders a record's row key, splits and decodes stored keys and cells, plans the row ranges a query scans, answers which table serves a query, and lints key designs.
package rowkey
