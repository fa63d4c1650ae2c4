// Package sqlengine runs the BigQuery emulator's query jobs on an embedded
// DuckDB (github.com/duckdb/duckdb-go/v2, DuckDB's official Go bindings).
// Importing it registers the engine with package bqemu, which otherwise
// answers query jobs with notImplemented; the emulator core stays free of
// cgo for the programs that only write.
//
// # Why DuckDB
//
// DuckDB answers the dedup query of docs/guide/querying.md
// (ROW_NUMBER() OVER (PARTITION BY reading_id ORDER BY ingested_at DESC)
// over a million readings) several times faster than SQLite
// (modernc.org/sqlite, pure Go) and builds faster from its prebuilt
// library; the figures are in docs/performance.md ("The BigQuery
// emulator's query engine"). It also has BigQuery's dialect: TIMESTAMP
// WITH TIME ZONE, INTERVAL arithmetic, * EXCLUDE (BigQuery's * EXCEPT),
// QUALIFY, COUNT(DISTINCT) and window functions with BigQuery's meaning,
// so the translation layer (translate.go) stays thin; SQLite has no
// timestamp type, no interval, no * EXCEPT. The cost is a larger binary
// and a prebuilt library per platform in the module cache. The module
// pins a duckdb-go release whose library modules the module proxy serves
// (duckdb-go v2.20000.0, DuckDB 2.0, is not one of them).
//
// # One copy of the data
//
// The emulator's in-memory store stays the source of truth. DuckDB holds
// no table: a query reads the store through the table function
// bq_table(project, dataset, table), which scans a snapshot of the
// table's row references (taken under the store's lock, values not copied)
// one 2,048-row vector at a time, on DuckDB's threads, filling only the
// columns the query uses.
//
// # Supported SQL
//
// A subset of GoogleSQL, enough for the documented queries: SELECT and WITH …
// SELECT with FROM, JOIN, WHERE, GROUP BY, HAVING, QUALIFY, ORDER BY,
// LIMIT/OFFSET, UNION/INTERSECT/EXCEPT, subqueries; SELECT * EXCEPT (…)
// and * REPLACE (…); `project.dataset.table`, dataset.table and (with a
// default dataset) bare table names, WITH names; window functions with
// OVER (PARTITION BY … ORDER BY … [frame]); string, bytes, numeric,
// typed (TIMESTAMP '…', DATE '…', DATETIME '…', NUMERIC '…') and
// INTERVAL literals; the functions in passThrough and renamed below plus
// CAST/SAFE_CAST, EXTRACT, TIMESTAMP_DIFF/DATE_DIFF, TIMESTAMP_TRUNC/
// DATE_TRUNC, DATE(), TIMESTAMP(), UNIX_SECONDS/MILLIS/MICROS,
// TIMESTAMP_SECONDS/MILLIS/MICROS, FORMAT_TIMESTAMP and CURRENT_TIMESTAMP()
// (the query's start, one instant for every row). Legacy SQL is run as
// GoogleSQL, [project:dataset.table] names included: queries that mean the
// same in both dialects give BigQuery's answer.
//
// Anything else (DML and DDL, scripts, query parameters, UNNEST, arrays and
// structs built in SQL, wildcard tables, INFORMATION_SCHEMA, time travel,
// functions outside the list) fails with BigQuery's invalidQuery error
// naming what is unsupported.
package sqlengine

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	bq "google.golang.org/api/bigquery/v2"

	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

func init() {
	bqemu.RegisterQueryEngine(New)
}

// macros are the helper functions the translation layer calls.
var macros = []string{
	"CREATE MACRO bq_timestamp_add(t, i) AS t + i",
	"CREATE MACRO bq_timestamp_sub(t, i) AS t - i",
	"CREATE MACRO bq_date_add(d, i) AS CAST(d + i AS DATE)",
	"CREATE MACRO bq_date_sub(d, i) AS CAST(d - i AS DATE)",
	"CREATE MACRO bq_safe_divide(a, b) AS CASE WHEN b = 0 THEN NULL ELSE a / b END",
}

// engine is a QueryEngine on one in-memory DuckDB database.
type engine struct {
	cat bqemu.Catalog
	db  *sql.DB
}

// New opens an in-memory DuckDB database set up for GoogleSQL's
// conventions (UTC, NULLs first in ascending order) with the bq_table
// function reading cat.
func New(cat bqemu.Catalog) (bqemu.QueryEngine, error) {
	conn, err := duckdb.NewConnector("", func(ex driver.ExecerContext) error {
		for _, s := range []string{"SET TimeZone = 'UTC'", "SET default_null_order = 'nulls_first_on_asc_last_on_desc'"} {
			if _, err := ex.ExecContext(context.Background(), s, nil); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlengine: open duckdb: %w", err)
	}
	db := sql.OpenDB(conn)
	e := &engine{cat: cat, db: db}
	ctx := context.Background()
	for _, m := range macros {
		if _, err := db.ExecContext(ctx, m); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlengine: %s: %w", m, err)
		}
	}
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlengine: %w", err)
	}
	defer c.Close()
	varchar, err := duckdb.NewTypeInfo(duckdb.TYPE_VARCHAR)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlengine: %w", err)
	}
	err = duckdb.RegisterTableUDF(c, "bq_table", duckdb.ParallelChunkTableFunction{
		Config:               duckdb.TableFunctionConfig{Arguments: []duckdb.TypeInfo{varchar, varchar, varchar}},
		BindArgumentsContext: e.bind,
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlengine: register bq_table: %w", err)
	}
	return e, nil
}

// Close implements bqemu.QueryEngine.
func (e *engine) Close() error { return e.db.Close() }

// snapshotsKey carries a query's table snapshots to bq_table's binding.
type snapshotsKey struct{}

// Run implements bqemu.QueryEngine.
func (e *engine) Run(ctx context.Context, q bqemu.Query) (*bqemu.QueryResult, error) {
	snaps := map[tableRef]*bqemu.TableSnapshot{}
	tr := &translator{q: q.SQL, project: q.Project, defaultDataset: q.DefaultDataset, legacy: q.LegacySQL, now: q.Now,
		lookup: func(ref tableRef) error {
			if snaps[ref] != nil {
				return nil
			}
			s, err := e.cat.Table(ref.project, ref.dataset, ref.table)
			if err != nil {
				return err
			}
			snaps[ref] = s
			return nil
		}}
	duckSQL, err := tr.translate()
	if err != nil {
		return nil, err
	}
	var bytes int64
	for _, s := range snaps {
		bytes += s.Bytes
	}
	rows, err := e.db.QueryContext(context.WithValue(ctx, snapshotsKey{}, snaps), duckSQL)
	if err != nil {
		return nil, duckError(err)
	}
	defer rows.Close()
	res, err := readResult(rows)
	if err != nil {
		return nil, err
	}
	res.StatementType = "SELECT"
	res.BytesProcessed = bytes
	return res, nil
}

// bind is bq_table's binding: the query's snapshot of the table.
func (e *engine) bind(ctx context.Context, _ map[string]any, args ...any) (duckdb.ParallelChunkTableSource, error) {
	if len(args) != 3 {
		return nil, fmt.Errorf("bq_table takes project, dataset and table")
	}
	var ref tableRef
	var ok [3]bool
	ref.project, ok[0] = args[0].(string)
	ref.dataset, ok[1] = args[1].(string)
	ref.table, ok[2] = args[2].(string)
	if !ok[0] || !ok[1] || !ok[2] {
		return nil, fmt.Errorf("bq_table takes three strings")
	}
	snaps, _ := ctx.Value(snapshotsKey{}).(map[tableRef]*bqemu.TableSnapshot)
	snap := snaps[ref]
	if snap == nil {
		var err error
		if snap, err = e.cat.Table(ref.project, ref.dataset, ref.table); err != nil {
			return nil, err
		}
	}
	return newScan(snap)
}

// scan is bq_table's source: a snapshot read one vector at a time, by as
// many of DuckDB's threads as it likes (each takes the next 2,048 rows).
type scan struct {
	rows  [][]any
	infos []duckdb.ColumnInfo
	sets  []setter
	next  atomic.Int64 // the first row not yet taken
}

// setter writes one stored (non-NULL) value into row r of column c.
type setter func(chunk duckdb.DataChunk, c, r int, v any) error

func newScan(snap *bqemu.TableSnapshot) (*scan, error) {
	s := &scan{rows: snap.Rows}
	for _, f := range snap.Schema {
		ti, conv, err := duckColumn(f)
		if err != nil {
			return nil, err
		}
		s.infos = append(s.infos, duckdb.ColumnInfo{Name: f.Name, T: ti})
		s.sets = append(s.sets, columnSetter(f, conv))
	}
	return s, nil
}

// columnSetter writes the common scalar types with SetChunkValue's typed
// path (no boxing), the others through conv.
func columnSetter(f *bq.TableFieldSchema, conv func(any) (any, error)) setter {
	if f.Mode != "REPEATED" {
		switch f.Type {
		case "STRING", "JSON", "GEOGRAPHY", "INTERVAL", "RANGE":
			return typedSetter(func(x string) string { return x })
		case "INTEGER":
			return typedSetter(func(x int64) int64 { return x })
		case "FLOAT":
			return typedSetter(func(x float64) float64 { return x })
		case "BOOLEAN":
			return typedSetter(func(x bool) bool { return x })
		case "TIMESTAMP":
			return typedSetter(func(us int64) time.Time { return time.UnixMicro(us).UTC() })
		}
	}
	return func(chunk duckdb.DataChunk, c, r int, v any) error {
		dv, err := conv(v)
		if err != nil {
			return err
		}
		return chunk.SetValue(c, r, dv)
	}
}

// typedSetter writes stored values of Go type S, converted by conv.
func typedSetter[S, D any](conv func(S) D) setter {
	return func(chunk duckdb.DataChunk, c, r int, v any) error {
		x, ok := v.(S)
		if !ok {
			return fmt.Errorf("stored %T, want %T", v, x)
		}
		return duckdb.SetChunkValue(chunk, c, r, conv(x))
	}
}

func (s *scan) ColumnInfos() []duckdb.ColumnInfo { return s.infos }

func (s *scan) Cardinality() *duckdb.CardinalityInfo {
	return &duckdb.CardinalityInfo{Cardinality: uint(len(s.rows)), Exact: true}
}

// Init lets DuckDB scan with its default number of threads.
func (s *scan) Init() duckdb.ParallelTableSourceInfo { return duckdb.ParallelTableSourceInfo{} }

// NewLocalState implements duckdb.ParallelChunkTableSource; the scan needs
// none.
func (s *scan) NewLocalState() any { return &struct{}{} }

// FillChunk writes the next rows into the projected columns of chunk.
func (s *scan) FillChunk(_ any, chunk duckdb.DataChunk) error {
	size := duckdb.GetDataChunkCapacity()
	start := int(s.next.Add(int64(size))) - size
	n := max(0, min(size, len(s.rows)-start))
	for c, set := range s.sets {
		if _, err := chunk.GetVector(c); err != nil {
			continue // not projected
		}
		for r := 0; r < n; r++ {
			row := s.rows[start+r]
			var v any
			if c < len(row) {
				v = row[c]
			}
			var err error
			if v == nil {
				err = chunk.SetValue(c, r, nil)
			} else {
				err = set(chunk, c, r, v)
			}
			if err != nil {
				return fmt.Errorf("column %s: %w", s.infos[c].Name, err)
			}
		}
	}
	return chunk.SetSize(n)
}

// numericScale scales NUMERIC's nine decimal places.
var numericScale = new(big.Int).Exp(big.NewInt(10), big.NewInt(9), nil)

// duckColumn maps a BigQuery column to a DuckDB type and the conversion of
// its stored values.
func duckColumn(f *bq.TableFieldSchema) (duckdb.TypeInfo, func(any) (any, error), error) {
	elem := *f
	elem.Mode = "NULLABLE"
	ti, conv, err := duckScalar(&elem)
	if err != nil || f.Mode != "REPEATED" {
		return ti, conv, err
	}
	lt, err := duckdb.NewListInfo(ti)
	if err != nil {
		return nil, nil, err
	}
	return lt, func(v any) (any, error) {
		arr, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("column %s: stored %T for an array", f.Name, v)
		}
		out := make([]any, len(arr))
		for i, x := range arr {
			y, err := conv(x)
			if err != nil {
				return nil, err
			}
			out[i] = y
		}
		return out, nil
	}, nil
}

func duckScalar(f *bq.TableFieldSchema) (duckdb.TypeInfo, func(any) (any, error), error) {
	same := func(v any) (any, error) { return v, nil }
	native := func(v any) (any, error) { return bqemu.NativeValue(f, v) }
	simple := func(t duckdb.Type, conv func(any) (any, error)) (duckdb.TypeInfo, func(any) (any, error), error) {
		ti, err := duckdb.NewTypeInfo(t)
		return ti, conv, err
	}
	switch f.Type {
	case "STRING", "JSON", "GEOGRAPHY", "INTERVAL", "RANGE":
		return simple(duckdb.TYPE_VARCHAR, same)
	case "BYTES":
		return simple(duckdb.TYPE_BLOB, same)
	case "INTEGER":
		return simple(duckdb.TYPE_BIGINT, same)
	case "FLOAT":
		return simple(duckdb.TYPE_DOUBLE, same)
	case "BOOLEAN":
		return simple(duckdb.TYPE_BOOLEAN, same)
	case "TIMESTAMP":
		return simple(duckdb.TYPE_TIMESTAMP_TZ, func(v any) (any, error) {
			us, ok := v.(int64)
			if !ok {
				return nil, fmt.Errorf("column %s: stored %T for a TIMESTAMP", f.Name, v)
			}
			return time.UnixMicro(us).UTC(), nil
		})
	case "DATE":
		return simple(duckdb.TYPE_DATE, native)
	case "DATETIME":
		return simple(duckdb.TYPE_TIMESTAMP, native)
	case "TIME":
		return simple(duckdb.TYPE_TIME, native)
	case "NUMERIC":
		ti, err := duckdb.NewDecimalInfo(38, 9)
		return ti, func(v any) (any, error) {
			x, err := bqemu.NativeValue(f, v)
			if err != nil {
				return nil, err
			}
			r := new(big.Rat).Mul(x.(*big.Rat), new(big.Rat).SetInt(numericScale))
			return new(big.Int).Quo(r.Num(), r.Denom()), nil
		}, err
	case "BIGNUMERIC":
		return simple(duckdb.TYPE_DOUBLE, func(v any) (any, error) {
			return strconv.ParseFloat(v.(string), 64)
		})
	case "RECORD":
		var entries []duckdb.StructEntry
		var convs []func(any) (any, error)
		for _, sub := range f.Fields {
			ti, conv, err := duckColumn(sub)
			if err != nil {
				return nil, nil, err
			}
			se, err := duckdb.NewStructEntry(ti, sub.Name)
			if err != nil {
				return nil, nil, err
			}
			entries = append(entries, se)
			convs = append(convs, conv)
		}
		if len(entries) == 0 {
			return nil, nil, fmt.Errorf("column %s: RECORD without fields", f.Name)
		}
		ti, err := duckdb.NewStructInfo(entries[0], entries[1:]...)
		return ti, func(v any) (any, error) {
			rec, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("column %s: stored %T for a RECORD", f.Name, v)
			}
			m := make(map[string]any, len(f.Fields))
			for i, sub := range f.Fields {
				var x any
				if i < len(rec) && rec[i] != nil {
					var err error
					if x, err = convs[i](rec[i]); err != nil {
						return nil, err
					}
				}
				m[sub.Name] = x
			}
			return m, nil
		}, err
	}
	return nil, nil, fmt.Errorf("column %s: type %s is not supported in queries", f.Name, f.Type)
}

// validName is a column name BigQuery would give a result column.
var validName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// readResult converts DuckDB's result to a QueryResult: DuckDB's types to
// BigQuery's, and unnamed expressions to f0_, f1_, … as BigQuery names
// them.
func readResult(rows *sql.Rows) (*bqemu.QueryResult, error) {
	names, err := rows.Columns()
	if err != nil {
		return nil, duckError(err)
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, duckError(err)
	}
	res := &bqemu.QueryResult{Rows: [][]any{}}
	anon := 0
	for i, ct := range types {
		name := names[i]
		if !validName.MatchString(name) {
			name = fmt.Sprintf("f%d_", anon)
			anon++
		}
		f, err := bqField(name, ct.DatabaseTypeName())
		if err != nil {
			return nil, err
		}
		res.Schema = append(res.Schema, f)
	}
	vals := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, duckError(err)
		}
		row := make([]any, len(vals))
		for i, v := range vals {
			x, err := storedResult(res.Schema[i], v)
			if err != nil {
				return nil, &bqemu.QueryError{Reason: "invalidQuery", Message: fmt.Sprintf("result column %s: %v", res.Schema[i].Name, err)}
			}
			row[i] = x
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return nil, duckError(err)
	}
	return res, nil
}

// storedResult converts one result value, the common cases directly.
func storedResult(f *bq.TableFieldSchema, v any) (any, error) {
	if f.Mode != "REPEATED" {
		switch x := v.(type) {
		case nil:
			return nil, nil
		case string:
			if f.Type == "STRING" {
				return x, nil
			}
		case int64:
			if f.Type == "INTEGER" {
				return x, nil
			}
		case float64:
			if f.Type == "FLOAT" {
				return x, nil
			}
		case bool:
			return x, nil
		case time.Time:
			if f.Type == "TIMESTAMP" {
				return x.UnixMicro(), nil
			}
		}
	}
	return bqemu.StoredValue(f, fromDuck(v))
}

// fromDuck turns DuckDB's Go values into the ones StoredValue takes.
func fromDuck(v any) any {
	switch x := v.(type) {
	case duckdb.Decimal:
		return new(big.Rat).SetFrac(x.Value, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(x.Scale)), nil))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromDuck(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fromDuck(e)
		}
		return out
	}
	return v
}

// bqField maps a DuckDB type name (as duckdb-go reports it) to a BigQuery
// result field.
func bqField(name, duckType string) (*bq.TableFieldSchema, error) {
	f := &bq.TableFieldSchema{Name: name, Mode: "NULLABLE"}
	t := strings.TrimSpace(duckType)
	if strings.HasSuffix(t, "[]") {
		inner, err := bqField(name, strings.TrimSuffix(t, "[]"))
		if err != nil {
			return nil, err
		}
		if inner.Mode == "REPEATED" {
			return nil, &bqemu.QueryError{Reason: "invalidQuery", Message: fmt.Sprintf("Cannot return an array of arrays (column %s)", name)}
		}
		inner.Mode = "REPEATED"
		return inner, nil
	}
	if strings.HasPrefix(t, "STRUCT(") && strings.HasSuffix(t, ")") {
		f.Type = "RECORD"
		for _, member := range splitTopLevel(t[len("STRUCT(") : len(t)-1]) {
			mname, mtype := splitMember(member)
			sub, err := bqField(mname, mtype)
			if err != nil {
				return nil, err
			}
			f.Fields = append(f.Fields, sub)
		}
		return f, nil
	}
	if strings.HasPrefix(t, "DECIMAL(") {
		f.Type = "NUMERIC"
		return f, nil
	}
	switch t {
	case "VARCHAR", "UUID", "JSON", "ENUM":
		f.Type = "STRING"
	case "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT", "UINTEGER", "USMALLINT", "UTINYINT", "UHUGEINT":
		f.Type = "INTEGER"
	case "DOUBLE", "FLOAT":
		f.Type = "FLOAT"
	case "BOOLEAN":
		f.Type = "BOOLEAN"
	case "DATE":
		f.Type = "DATE"
	case "TIME":
		f.Type = "TIME"
	case "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS":
		f.Type = "DATETIME"
	case "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE":
		f.Type = "TIMESTAMP"
	case "BLOB":
		f.Type = "BYTES"
	case "\"NULL\"", "NULL":
		f.Type = "INTEGER" // an untyped NULL: BigQuery types it INT64
	default:
		return nil, &bqemu.QueryError{Reason: "invalidQuery", Message: fmt.Sprintf("Unsupported by the BigQuery emulator: result column %s has type %s, which has no BigQuery counterpart in the emulator", name, duckType)}
	}
	return f, nil
}

// splitTopLevel splits a STRUCT's member list at top-level commas.
func splitTopLevel(s string) []string {
	var out []string
	depth, start, inQuote := 0, 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			inQuote = !inQuote
		case inQuote:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// splitMember splits a STRUCT member `"name" TYPE` or `name TYPE`.
func splitMember(m string) (string, string) {
	if strings.HasPrefix(m, `"`) {
		for i := 1; i < len(m); i++ {
			if m[i] == '"' {
				if i+1 < len(m) && m[i+1] == '"' {
					i++
					continue
				}
				return strings.ReplaceAll(m[1:i], `""`, `"`), strings.TrimSpace(m[i+1:])
			}
		}
	}
	name, typ, _ := strings.Cut(m, " ")
	return name, strings.TrimSpace(typ)
}

// invalidQuery is BigQuery's error for a query it cannot run.
func invalidQuery(format string, args ...any) error {
	return &bqemu.QueryError{Reason: "invalidQuery", Message: fmt.Sprintf(format, args...)}
}

var (
	duckColumnRE = regexp.MustCompile(`Referenced column "([^"]+)" not found`)
	duckFuncRE   = regexp.MustCompile(`(?:Scalar|Aggregate|Table) Function with name "?([A-Za-z0-9_]+)"? does not exist`)
)

// duckError turns a DuckDB error into BigQuery's invalidQuery, in
// BigQuery's words where the two say the same thing. A *bqemu.QueryError
// (from bq_table's binding) passes through.
func duckError(err error) error {
	var qe *bqemu.QueryError
	if errors.As(err, &qe) {
		return qe
	}
	msg := err.Error()
	if m := duckColumnRE.FindStringSubmatch(msg); m != nil {
		return invalidQuery("Unrecognized name: %s", m[1])
	}
	if m := duckFuncRE.FindStringSubmatch(msg); m != nil {
		return invalidQuery("Function not found: %s", m[1])
	}
	if strings.Contains(msg, "Not found: ") {
		i := strings.Index(msg, "Not found: ")
		return &bqemu.QueryError{Reason: "notFound", Message: strings.TrimSpace(msg[i:])}
	}
	first, _, _ := strings.Cut(msg, "\n")
	return invalidQuery("%s", first)
}
