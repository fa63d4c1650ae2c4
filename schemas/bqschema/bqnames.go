package bqschema

import (
	"fmt"
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
