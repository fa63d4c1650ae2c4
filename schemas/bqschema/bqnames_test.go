package bqschema

import (
	"strings"
	"testing"
)

func TestCheckBigQueryDataset(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // substring of the error; empty: accepted
	}{
		{"letters digits underscores", "vitals_2026", ""},
		{"upper case", "Vitals", ""},
		{"a dash is refused", "my-vitals", `"-" at byte 2`},
		{"a dot is refused", "vitals.readings", `"." at byte 6`},
		{"a space is refused", "my vitals", "only letters, digits and underscores (e.g. my_vitals)"},
		{"unicode is refused", "vitalé", "at byte 5"},
		{"empty", "", "empty"},
		{"too long", strings.Repeat("a", 1025), "at most 1024"},
		{"longest", strings.Repeat("a", 1024), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBigQueryDataset(tc.in)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckBigQueryDataset(%q) = %v, want nil", tc.in, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckBigQueryDataset(%q) = %v, want an error with %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestCheckBigQueryTable(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"plain", "readings", ""},
		{"dashes and spaces", "readings-2026 copy", ""},
		{"unicode letters", "lectures_été", ""},
		{"a dot is refused", "readings.v2", `"." at byte 8`},
		{"a slash is refused", "a/b", `"/" at byte 1`},
		{"a dollar is refused", "t$1", `"$"`},
		{"invalid UTF-8 is refused", "t\xff", "at byte 1"},
		{"empty", "", "empty"},
		{"too long", strings.Repeat("é", 513), "at most 1024"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBigQueryTable(tc.in)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckBigQueryTable(%q) = %v, want nil", tc.in, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckBigQueryTable(%q) = %v, want an error with %q", tc.in, err, tc.want)
			}
		})
	}
}
