// Package filters builds the Bigtable read filters that both the
// pipeline's read-back (bigtableio) and the query tool (readpath, which
// links no Beam) use.
package filters

import "cloud.google.com/go/bigtable"

// Families keeps the cells of the named families: a column range over
// each whole family, interleaved when there are several; none keeps
// nothing. It selects what a family-name regular expression would, and
// the Bigtable emulator evaluates it with a string comparison, where it
// compiles a family regular expression again for every cell it reads.
func Families(names []string) bigtable.Filter {
	fs := make([]bigtable.Filter, len(names))
	for i, f := range names {
		fs[i] = bigtable.ColumnRangeFilter(f, "", "")
	}
	switch len(fs) {
	case 0:
		return bigtable.BlockAllFilter()
	case 1:
		return fs[0]
	}
	return bigtable.InterleaveFilters(fs...)
}
