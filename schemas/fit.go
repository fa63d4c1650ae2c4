package schemas

import (
	"fmt"
	"slices"
	"strings"
)

// bqColumnTypesFor lists, per kind of value, the BigQuery column types that
// hold every value of that kind: a float does not fit an INT64 column (its
// fraction would be a write failure), nor a string a FLOAT64 one. STRING
// takes any scalar's text.
var bqColumnTypesFor = map[string][]string{
	TypeString:    {"STRING", "BYTES"},
	TypeBytes:     {"BYTES", "STRING"},
	TypeFloat:     {"FLOAT64", "STRING"},
	TypeInt:       {"INT64", "FLOAT64", "STRING"},
	TypeBool:      {"BOOL", "STRING"},
	TypeTimestamp: {"TIMESTAMP", "INT64", "STRING"},
}

// bigtableInt64BETypes are the value kinds an int64be cell holds exactly.
var bigtableInt64BETypes = []string{TypeInt, TypeBool, TypeTimestamp}

// valueType is the spec type of a column's value: a field's type, bool
// for an imputed flag, timestamp for $event_time and $ingested_at, string
// for $reading_id; "" when unknown.
func (s *Spec) valueType(v string) string {
	switch v {
	case ValueEventTime, ValueIngestedAt:
		return TypeTimestamp
	case ValueReadingID:
		return TypeString
	}
	if f := s.Field(v); f != nil {
		return f.Type
	}
	for _, im := range s.Impute {
		if im.Flag == v {
			return TypeBool
		}
	}
	return ""
}

// checkColumnTypes refuses a column whose type cannot hold every value of
// the field it is given, before any reading is written: each such reading
// would otherwise be a write failure.
func (s *Spec) checkColumnTypes() error {
	for ti, t := range s.Bigtable.Tables {
		for fi, fam := range t.Families {
			for ci, c := range fam.Columns {
				typ := s.valueType(c.Value)
				if c.Encoding != "int64be" || typ == "" || slices.Contains(bigtableInt64BETypes, typ) {
					continue
				}
				fix := "drop encoding: int64be (text keeps every value)"
				if typ == TypeFloat {
					fix += ", or declare the field type: int if its values are whole"
				}
				return s.Errorf(fmt.Sprintf("bigtable.tables[%d].families[%d].columns[%d].encoding", ti, fi, ci),
					"column %s:%s is an 8-byte integer (int64be) but field %s is a %s, which it cannot hold exactly; %s", fam.Name, c.Qualifier, c.Value, typ, fix)
			}
		}
	}
	if bq := s.BigQuery; bq != nil {
		for ci, c := range bq.Columns {
			typ := s.valueType(c.Value)
			ok, known := bqColumnTypesFor[typ]
			if !known || slices.Contains(ok, c.Type) {
				continue
			}
			fix := fmt.Sprintf("make the column type %s", strings.Join(ok, " or "))
			for ft, types := range bqColumnTypesFor {
				if types[0] == c.Type && s.Field(c.Value) != nil && ft != TypeBytes {
					fix += fmt.Sprintf(", or declare the field type: %s if its values are such", ft)
				}
			}
			return s.Errorf(fmt.Sprintf("bigquery.columns[%d].type", ci),
				"column %s is %s but its value %s is a %s, which %s cannot hold (every reading would fail to write); %s",
				c.Name, c.Type, c.Value, typ, c.Type, fix)
		}
	}
	return nil
}

// CheckBigQueryColumns checks that bq declares columns, each of a type
// the Storage Write API row message can carry, under a valid column name
// and once.
func CheckBigQueryColumns(bq *BigQuerySpec) error {
	if bq == nil || len(bq.Columns) == 0 {
		return fmt.Errorf("bigquery: the spec has no bigquery columns")
	}
	seen := make(map[string]bool, len(bq.Columns))
	for _, c := range bq.Columns {
		switch c.Type {
		case "STRING", "BYTES", "INT64", "TIMESTAMP", "FLOAT64", "BOOL":
		default:
			return fmt.Errorf("bigquery column %s: unsupported type %q; use STRING, FLOAT64, INT64, BOOL, TIMESTAMP or BYTES", c.Name, c.Type)
		}
		if !protoIdent(c.Name) {
			return fmt.Errorf("bigquery column %q: not a valid column name; use letters, digits and _", c.Name)
		}
		if seen[c.Name] {
			return fmt.Errorf("bigquery column %s: declared twice", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// protoIdent reports whether s is a valid protobuf field name, which every
// valid BigQuery column name is.
func protoIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
