package bqschema

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// BigQuery's naming rules, checked before any call so that a name BigQuery
// would refuse is a usage error, not a failed request
// (https://cloud.google.com/bigquery/docs/datasets#dataset-naming,
// https://cloud.google.com/bigquery/docs/tables#table_naming).
const maxBigQueryNameBytes = 1024

// CheckBigQueryDataset reports whether name is a dataset name BigQuery
// accepts: 1 to 1,024 letters, digits and underscores (ASCII).
func CheckBigQueryDataset(name string) error {
	if name == "" {
		return fmt.Errorf("dataset name is empty")
	}
	if len(name) > maxBigQueryNameBytes {
		return fmt.Errorf("dataset name %.20q… is %d bytes: BigQuery allows at most %d", name, len(name), maxBigQueryNameBytes)
	}
	for i, r := range name {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("dataset name %q has %q at byte %d: BigQuery dataset names take only letters, digits and underscores (e.g. %s)", name, string(r), i, suggestDataset(name))
		}
	}
	return nil
}

// CheckBigQueryTable reports whether name is a table name BigQuery accepts:
// 1 to 1,024 bytes of letters, marks, digits, connectors (such as _),
// dashes and spaces (Unicode categories L, M, N, Pc, Pd, Zs).
func CheckBigQueryTable(name string) error {
	if name == "" {
		return fmt.Errorf("table name is empty")
	}
	if len(name) > maxBigQueryNameBytes {
		return fmt.Errorf("table name %.20q… is %d bytes: BigQuery allows at most %d", name, len(name), maxBigQueryNameBytes)
	}
	for i, r := range name {
		if r == unicode.ReplacementChar || !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc, unicode.Pd, unicode.Zs) {
			return fmt.Errorf("table name %q has %q at byte %d: BigQuery table names take letters, digits, underscores, dashes and spaces", name, string(r), i)
		}
	}
	return nil
}

// suggestDataset turns a refused dataset name into one BigQuery accepts,
// for the error's example.
func suggestDataset(name string) string {
	out := make([]byte, 0, len(name))
	for _, r := range name {
		switch {
		case r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			out = append(out, byte(r))
		default:
			out = append(out, '_')
		}
	}
	return string(out)
}

// TableRef names a BigQuery table.
type TableRef struct{ Project, Dataset, Table string }

// ParseTableRef parses [PROJECT:]DATASET.TABLE (or PROJECT.DATASET.TABLE),
// as bq and the launcher's flags take a table; project is the default
// project.
func ParseTableRef(v, project string) (TableRef, error) {
	ref := TableRef{Project: project}
	rest := v
	if i := strings.IndexByte(v, ':'); i >= 0 {
		ref.Project, rest = v[:i], v[i+1:]
	}
	parts := strings.Split(rest, ".")
	switch {
	case len(parts) == 3 && !strings.Contains(v, ":"):
		ref.Project, ref.Dataset, ref.Table = parts[0], parts[1], parts[2]
	case len(parts) == 2:
		ref.Dataset, ref.Table = parts[0], parts[1]
	default:
		return ref, errors.New("give [PROJECT:]DATASET.TABLE")
	}
	if ref.Project == "" || ref.Dataset == "" || ref.Table == "" {
		return ref, errors.New("give [PROJECT:]DATASET.TABLE, none of them empty")
	}
	if err := CheckBigQueryDataset(ref.Dataset); err != nil {
		return ref, err
	}
	if err := CheckBigQueryTable(ref.Table); err != nil {
		return ref, err
	}
	return ref, nil
}
