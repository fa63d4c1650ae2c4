package schemas

import (
	"unicode/utf8"
)

// CSVSpec says how a CSV file's rows are read: RFC 4180 (quoted fields,
// embedded newlines), a header row naming the columns by default.
type CSVSpec struct {
	// Header says the file's first row names its columns (default true).
	Header *bool `yaml:"header,omitempty" jsonschema:"default=true"`
	// Columns names the columns in order; required without a header, and
	// with one it replaces the header's names.
	Columns []string `yaml:"columns,omitempty" jsonschema:"example=sensor_id"`
	// Delimiter is the one character between fields (default ",").
	Delimiter string `yaml:"delimiter,omitempty" jsonschema:"default=,"`
}

// HasHeader reports whether the file's first row is a header.
func (c *CSVSpec) HasHeader() bool { return c == nil || c.Header == nil || *c.Header }

// Comma is the field delimiter.
func (c *CSVSpec) Comma() rune {
	if c == nil || c.Delimiter == "" {
		return ','
	}
	r, _ := utf8.DecodeRuneInString(c.Delimiter)
	return r
}

// Names are the declared column names (nil: the header's).
func (c *CSVSpec) Names() []string {
	if c == nil {
		return nil
	}
	return c.Columns
}

func (s *Spec) validateCSV() error {
	c := s.CSV
	if c == nil {
		return nil
	}
	if c.Delimiter != "" {
		r, n := utf8.DecodeRuneInString(c.Delimiter)
		if n != len(c.Delimiter) || r == '"' || r == '\r' || r == '\n' || r == utf8.RuneError {
			return s.Errorf("csv.delimiter", "%q; give one character other than a quote or a line end (e.g. \";\" or \"\\t\")", c.Delimiter)
		}
	}
	if !c.HasHeader() && len(c.Columns) == 0 {
		return s.Errorf("csv.columns", "missing with header: false; list the file's columns in order")
	}
	return nil
}

// ColumnKind is what a column of a file holds, as its file declares it.
type ColumnKind int

// Column kinds.
const (
	// ColText is a CSV cell: text read as the field's type reads it.
	ColText ColumnKind = iota
	ColString
	ColBytes
	ColInt
	ColFloat
	ColDecimal
	ColBool
	// ColTimestamp is an instant (UTC-adjusted); ColLocalTimestamp a wall
	// time without a zone, read in the field's timezone; ColDate a day.
	ColTimestamp
	ColLocalTimestamp
	ColDate
	ColMap
	ColOther
)

// Column is one column of a file: its dotted name, its kind, and the
// file's own name for its type, for errors.
type Column struct {
	Name string
	Kind ColumnKind
	Type string
}

// CanHold reports whether a column of kind k can hold a field of type t.
func CanHold(k ColumnKind, t string) bool {
	switch k {
	case ColText:
		return true
	case ColString:
		return t == TypeString || t == TypeBytes || t == TypeTimestamp || t == TypeTags
	case ColBytes:
		return t == TypeString || t == TypeBytes
	case ColInt:
		return t == TypeInt || t == TypeFloat || t == TypeTimestamp || t == TypeString
	case ColFloat:
		return t == TypeFloat
	case ColDecimal:
		return t == TypeFloat || t == TypeInt || t == TypeString
	case ColBool:
		return t == TypeBool
	case ColTimestamp, ColLocalTimestamp, ColDate:
		return t == TypeTimestamp || t == TypeString
	case ColMap:
		return t == TypeTags
	}
	return false
}
