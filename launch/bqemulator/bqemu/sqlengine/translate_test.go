package sqlengine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

func TestTranslate(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 890000000, time.UTC)
	known := map[tableRef]bool{
		{"p", "vitals", "readings"}:        true,
		{"p", "vitals", "readings_hourly"}: true,
		{"other-proj", "d", "t"}:           true,
	}
	translate := func(q string, legacy bool) (string, error) {
		tr := &translator{q: q, project: "p", now: now, legacy: legacy, lookup: func(r tableRef) error {
			if !known[r] {
				return &bqemu.QueryError{Reason: "notFound", Message: "Not found: Table " + r.project + ":" + r.dataset + "." + r.table}
			}
			return nil
		}}
		return tr.translate()
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"dataset.table gets its implicit alias",
			"SELECT COUNT(*), COUNT(DISTINCT reading_id) FROM vitals.readings",
			"SELECT count(*), count(DISTINCT reading_id) FROM bq_table('p', 'vitals', 'readings') AS \"readings\""},
		{"backticked project.dataset.table with an alias",
			"SELECT r.sensor_id FROM `other-proj.d.t` r WHERE r.x = 1",
			"SELECT r.sensor_id FROM bq_table('other-proj', 'd', 't') r WHERE r.x = 1"},
		{"backticked parts",
			"SELECT * FROM `other-proj`.d.`t` AS x",
			"SELECT * FROM bq_table('other-proj', 'd', 't') AS x"},
		{"the README's dedup query",
			"SELECT * EXCEPT (n) FROM (\n  SELECT *, ROW_NUMBER() OVER (PARTITION BY reading_id ORDER BY ingested_at DESC) AS n\n  FROM `p.vitals.readings`\n  WHERE event_timestamp >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY))\nWHERE n = 1",
			"SELECT * EXCLUDE ( n ) FROM ( SELECT *, row_number() OVER ( PARTITION BY reading_id ORDER BY ingested_at DESC ) AS n FROM bq_table('p', 'vitals', 'readings') AS \"readings\" WHERE event_timestamp >= bq_timestamp_sub(TIMESTAMPTZ '2026-03-04 05:06:07.89+00', INTERVAL 1 DAY) ) WHERE n = 1"},
		{"t.* EXCEPT",
			"SELECT r.* EXCEPT (a, b) FROM vitals.readings r",
			"SELECT r.* EXCLUDE ( a, b ) FROM bq_table('p', 'vitals', 'readings') r"},
		{"double-quoted strings are strings; escapes resolve",
			`SELECT "it's", 'a\nb', r'\d' FROM vitals.readings WHERE sensor_id = "x"`,
			"SELECT 'it''s', 'a\nb', '\\d' FROM bq_table('p', 'vitals', 'readings') AS \"readings\" WHERE sensor_id = 'x'"},
		{"float literals stay floats",
			"SELECT 1.5, .5, 2, 1e3 FROM vitals.readings",
			"SELECT 1.5e0, 0.5e0, 2, 1e3 FROM bq_table('p', 'vitals', 'readings') AS \"readings\""},
		{"CTE names are not tables",
			"WITH x AS (SELECT * FROM vitals.readings), y AS (SELECT 1 AS k) SELECT * FROM x JOIN y ON TRUE",
			"WITH x AS ( SELECT * FROM bq_table('p', 'vitals', 'readings') AS \"readings\" ), y AS ( SELECT 1 AS k ) SELECT * FROM \"x\" JOIN \"y\" ON TRUE"},
		{"comma joins and subqueries",
			"SELECT a.x FROM vitals.readings a, (SELECT 1) b, vitals.readings_hourly WHERE TRUE",
			"SELECT a.x FROM bq_table('p', 'vitals', 'readings') a, ( SELECT 1 ) b, bq_table('p', 'vitals', 'readings_hourly') AS \"readings_hourly\" WHERE TRUE"},
		{"casts and typed literals",
			"SELECT CAST(x AS INT64), SAFE_CAST(y AS FLOAT64), CAST(z AS STRING) FROM vitals.readings WHERE ts > TIMESTAMP '2026-01-01 00:00:00 UTC'",
			"SELECT CAST(x AS BIGINT), TRY_CAST(y AS DOUBLE), CAST(z AS VARCHAR) FROM bq_table('p', 'vitals', 'readings') AS \"readings\" WHERE ts > CAST('2026-01-01 00:00:00 UTC' AS TIMESTAMPTZ)"},
		{"date functions",
			"SELECT TIMESTAMP_DIFF(a, b, HOUR), TIMESTAMP_TRUNC(a, DAY), DATE(a), EXTRACT(HOUR FROM a), UNIX_MILLIS(a) FROM vitals.readings",
			"SELECT date_sub('hour', b, a), date_trunc('day', a), CAST(a AS DATE), EXTRACT(HOUR FROM a), epoch_ms(a) FROM bq_table('p', 'vitals', 'readings') AS \"readings\""},
		{"renamed functions",
			"SELECT COUNTIF(x > 1), IF(a, 1, 2), LOGICAL_AND(b) FROM vitals.readings GROUP BY 1 ORDER BY 1 DESC LIMIT 5",
			"SELECT count_if(x > 1), if(a, 1, 2), bool_and(b) FROM bq_table('p', 'vitals', 'readings') AS \"readings\" GROUP BY 1 ORDER BY 1 DESC LIMIT 5"},
		{"comments and a trailing semicolon",
			"SELECT 1 -- one\n# also a comment\n/* and this */ FROM vitals.readings;",
			"SELECT 1 FROM bq_table('p', 'vitals', 'readings') AS \"readings\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := translate(tc.in, false)
			if err != nil {
				t.Fatalf("translate: %v", err)
			}
			if got != tc.want {
				t.Errorf("translate(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
	t.Run("legacy SQL table names", func(t *testing.T) {
		got, err := translate("SELECT COUNT(*) FROM [p:vitals.readings]", true)
		if err != nil {
			t.Fatal(err)
		}
		if want := "SELECT count(*) FROM bq_table('p', 'vitals', 'readings') AS \"readings\""; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})

	for _, tc := range []struct {
		name, in, reason, msg string
	}{
		{"DML", "DELETE FROM vitals.readings WHERE TRUE", "invalidQuery", "statement DELETE"},
		{"a script", "SELECT 1; SELECT 2", "invalidQuery", "multi-statement queries"},
		{"query parameters", "SELECT * FROM vitals.readings WHERE sensor_id = @id", "invalidQuery", "query parameters (@id)"},
		{"unknown function", "SELECT ST_GEOGPOINT(1, 2) FROM vitals.readings", "invalidQuery", "function ST_GEOGPOINT"},
		{"UNNEST", "SELECT * FROM UNNEST([1, 2])", "invalidQuery", "UNNEST"},
		{"wildcard table", "SELECT * FROM `p.vitals.read*`", "invalidQuery", "wildcard tables"},
		{"INFORMATION_SCHEMA", "SELECT * FROM vitals.INFORMATION_SCHEMA.TABLES", "invalidQuery", "INFORMATION_SCHEMA"},
		{"time travel", "SELECT * FROM vitals.readings FOR SYSTEM_TIME AS OF CURRENT_TIMESTAMP()", "invalidQuery", "FOR SYSTEM_TIME AS OF"},
		{"DuckDB casts are not GoogleSQL", "SELECT x::INT FROM vitals.readings", "invalidQuery", `Syntax error: Unexpected "::" at [1:9]`},
		{"WEEK is Sunday-based in BigQuery", "SELECT TIMESTAMP_TRUNC(a, WEEK) FROM vitals.readings", "invalidQuery", "date part WEEK"},
		{"bare table without a default dataset", "SELECT * FROM readings", "invalidQuery", `Table "readings" must be qualified with a dataset`},
		{"missing table", "SELECT * FROM vitals.nope", "notFound", "Not found: Table p:vitals.nope"},
		{"unclosed string", "SELECT 'abc", "invalidQuery", "Syntax error: unclosed"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			_, err := translate(tc.in, false)
			var qe *bqemu.QueryError
			if !errors.As(err, &qe) {
				t.Fatalf("err = %v, want a *bqemu.QueryError", err)
			}
			if qe.Reason != tc.reason || !strings.Contains(qe.Message, tc.msg) {
				t.Errorf("err = %s: %s, want %s containing %q", qe.Reason, qe.Message, tc.reason, tc.msg)
			}
		})
	}
}
