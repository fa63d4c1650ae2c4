package bqemu

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	bq "google.golang.org/api/bigquery/v2"
)

// The DDL statements the emulator runs itself, because they change a
// table's metadata rather than read rows: the ones a CDC set-up needs.
//
//	ALTER TABLE t ADD PRIMARY KEY (c, …) NOT ENFORCED
//	ALTER TABLE t DROP PRIMARY KEY [IF EXISTS]
//	ALTER TABLE t SET OPTIONS (max_staleness = INTERVAL n MINUTE|HOUR|SECOND|DAY)
//	ALTER TABLE t SET OPTIONS (max_staleness = INTERVAL 'h:m:s' HOUR TO SECOND)
//
// t is `project.dataset.table`, project.dataset.table or dataset.table.

var (
	ddlAlterRE   = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?((?:` + "`[^`]+`" + `|[A-Za-z0-9_\-]+)(?:\s*\.\s*(?:` + "`[^`]+`" + `|[A-Za-z0-9_\-]+))*)\s+(.*?)\s*;?\s*$`)
	ddlAddPKRE   = regexp.MustCompile(`(?is)^ADD\s+PRIMARY\s+KEY\s*\(([^)]*)\)\s*NOT\s+ENFORCED$`)
	ddlDropPKRE  = regexp.MustCompile(`(?is)^DROP\s+PRIMARY\s+KEY(\s+IF\s+EXISTS)?$`)
	ddlOptionsRE = regexp.MustCompile(`(?is)^SET\s+OPTIONS\s*\(\s*max_staleness\s*=\s*INTERVAL\s+(?:(\d+)\s+(SECOND|MINUTE|HOUR|DAY)|'(\d+):(\d+):(\d+)'\s+HOUR\s+TO\s+SECOND)\s*\)$`)
)

// isDDL reports whether sql is an ALTER TABLE statement (for the emulator
// to run, or refuse, itself).
func isDDL(sql string) bool { return ddlAlterRE.MatchString(sql) }

// runDDL runs an ALTER TABLE statement of project proj.
func (s *Server) runDDL(proj, sql string) (*QueryResult, *apiError) {
	m := ddlAlterRE.FindStringSubmatch(sql)
	var parts []string
	for _, p := range strings.Split(m[1], ".") {
		p = strings.Trim(strings.TrimSpace(p), "`")
		parts = append(parts, strings.Split(p, ".")...)
	}
	if len(parts) == 2 {
		parts = append([]string{proj}, parts...)
	}
	if len(parts) != 3 {
		return nil, &apiError{http.StatusBadRequest, "invalidQuery", fmt.Sprintf("Table name %q must be qualified with a dataset (e.g. dataset.table)", m[1])}
	}
	action := strings.TrimSpace(m[2])
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.tableLocked(parts[0], parts[1], parts[2])
	if err != nil {
		return nil, asAPIError(err)
	}
	next := *t.meta
	switch {
	case ddlAddPKRE.MatchString(action):
		if pk := primaryKeyNames(t.meta); len(pk) > 0 {
			return nil, &apiError{http.StatusBadRequest, "invalidQuery", fmt.Sprintf("Table %s already has a primary key (%s)", tableName(parts[0], parts[1], parts[2]), strings.Join(pk, ", "))}
		}
		var cols []string
		for _, c := range strings.Split(ddlAddPKRE.FindStringSubmatch(action)[1], ",") {
			cols = append(cols, strings.Trim(strings.TrimSpace(c), "`"))
		}
		tc := &bq.TableConstraints{PrimaryKey: &bq.TableConstraintsPrimaryKey{Columns: cols}}
		if old := t.meta.TableConstraints; old != nil {
			tc.ForeignKeys = old.ForeignKeys
		}
		next.TableConstraints = tc
	case ddlDropPKRE.MatchString(action):
		if len(primaryKeyNames(t.meta)) == 0 {
			if ddlDropPKRE.FindStringSubmatch(action)[1] != "" {
				return &QueryResult{StatementType: "ALTER_TABLE"}, nil
			}
			return nil, &apiError{http.StatusBadRequest, "invalidQuery", fmt.Sprintf("Table %s has no primary key", tableName(parts[0], parts[1], parts[2]))}
		}
		cp := *t.meta.TableConstraints
		cp.PrimaryKey = nil
		next.TableConstraints = &cp
	case ddlOptionsRE.MatchString(action):
		o := ddlOptionsRE.FindStringSubmatch(action)
		var d time.Duration
		if o[1] != "" {
			n, _ := strconv.Atoi(o[1])
			d = time.Duration(n) * map[string]time.Duration{"SECOND": time.Second, "MINUTE": time.Minute, "HOUR": time.Hour, "DAY": 24 * time.Hour}[strings.ToUpper(o[2])]
		} else {
			h, _ := strconv.Atoi(o[3])
			mi, _ := strconv.Atoi(o[4])
			se, _ := strconv.Atoi(o[5])
			d = time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(se)*time.Second
		}
		next.MaxStaleness = intervalText(d)
	default:
		return nil, &apiError{http.StatusBadRequest, "invalidQuery", fmt.Sprintf("Unsupported by the BigQuery emulator: ALTER TABLE … %s. It runs ADD PRIMARY KEY (…) NOT ENFORCED, DROP PRIMARY KEY and SET OPTIONS (max_staleness = INTERVAL …)", firstWords(action, 3))}
	}
	if err := validateConstraints(&next); err != nil {
		return nil, &apiError{http.StatusBadRequest, "invalidQuery", err.Error()}
	}
	next.LastModifiedTime = uint64(msString(s.now()))
	t.meta = &next
	t.etagSeq++
	t.schemaVersion++
	t.reindexLocked()
	return &QueryResult{StatementType: "ALTER_TABLE"}, nil
}

// intervalText renders a duration as BigQuery's canonical INTERVAL text,
// e.g. "0-0 0 0:15:0".
func intervalText(d time.Duration) string {
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h := d / time.Hour
	d -= h * time.Hour
	m := d / time.Minute
	d -= m * time.Minute
	return fmt.Sprintf("0-0 %d %d:%d:%d", days, h, m, d/time.Second)
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}
