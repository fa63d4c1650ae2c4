package parts

import (
	"io"
	"reflect"
	"testing"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/fileio"
)

// ks is a sample row key and its offset.
func ks(key string, offset int64) bigtableio.KeySample {
	return bigtableio.KeySample{Key: key, Offset: offset}
}

func TestKeys(t *testing.T) {
	kr := func(start, end string) bigtableio.KeyRange { return bigtableio.KeyRange{Start: start, End: end} }
	samples := []bigtableio.KeySample{ks("b", 100), ks("c", 200), ks("d", 300), ks("e", 400), ks("", 500)}
	for _, tc := range []struct {
		name    string
		samples []bigtableio.KeySample
		target  int64
		want    []Part
	}{
		{"no target: the whole table", samples, 0, []Part{{Bytes: 500}}},
		{"a table within the target: the whole table", samples, 500, []Part{{Bytes: 500}}},
		{"two samples a part", samples, 200, []Part{
			{Keys: kr("", "c"), Bytes: 200}, {Keys: kr("c", "e"), Bytes: 200}, {Keys: kr("e", ""), Bytes: 100}}},
		{"a sample a part", samples, 100, []Part{
			{Keys: kr("", "b"), Bytes: 100}, {Keys: kr("b", "c"), Bytes: 100}, {Keys: kr("c", "d"), Bytes: 100},
			{Keys: kr("d", "e"), Bytes: 100}, {Keys: kr("e", ""), Bytes: 100}}},
		{"between samples: the last within the target", samples, 250, []Part{
			{Keys: kr("", "c"), Bytes: 200}, {Keys: kr("c", "e"), Bytes: 200}, {Keys: kr("e", ""), Bytes: 100}}},
		{"a chunk over the target is a part of its own",
			[]bigtableio.KeySample{ks("b", 10), ks("c", 900), ks("d", 950), ks("", 1000)}, 100, []Part{
				{Keys: kr("", "b"), Bytes: 10}, {Keys: kr("b", "c"), Bytes: 890}, {Keys: kr("c", ""), Bytes: 100}}},
		{"samples out of order are sorted",
			[]bigtableio.KeySample{ks("", 300), ks("c", 200), ks("b", 100)}, 100, []Part{
				{Keys: kr("", "b"), Bytes: 100}, {Keys: kr("b", "c"), Bytes: 100}, {Keys: kr("c", ""), Bytes: 100}}},
		{"only the end: the whole table", []bigtableio.KeySample{ks("", 1000)}, 100, []Part{{Bytes: 1000}}},
		{"the last key at the end is not a cut",
			[]bigtableio.KeySample{ks("b", 100), ks("z", 200)}, 100, []Part{
				{Keys: kr("", "b"), Bytes: 100}, {Keys: kr("b", ""), Bytes: 100}}},
		{"no samples", nil, 100, []Part{{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Keys(tc.samples, tc.target)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Keys(%v, %d)\n got %+v\nwant %+v", tc.samples, tc.target, got, tc.want)
			}
		})
	}
}

func TestHours(t *testing.T) {
	const t0 = 1772359200000 // 2026-03-01T10:00:00Z
	for _, tc := range []struct {
		name                                 string
		fromMs, toMs, firstMs, lastMs, bytes int64
		target                               int64
		want                                 []Part
	}{
		{"no target", 0, 0, t0, t0 + 6*hour - 1, 600, 0, []Part{{Bytes: 600}}},
		{"within the target", 0, 0, t0, t0 + 6*hour - 1, 600, 600, []Part{{Bytes: 600}}},
		{"one hour, however large", 0, 0, t0 + 5, t0 + hour - 5, 600, 100, []Part{{Bytes: 600}}},
		{"two hours a part, open at both ends", 0, 0, t0 + 5, t0 + 6*hour - 5, 600, 200, []Part{
			{FromMs: 0, ToMs: t0 + 2*hour, Bytes: 200}, {FromMs: t0 + 2*hour, ToMs: t0 + 4*hour, Bytes: 200},
			{FromMs: t0 + 4*hour, ToMs: 0, Bytes: 200}}},
		{"the run's bounds at the ends", t0 - hour, t0 + 7*hour, t0, t0 + 6*hour - 1, 600, 300, []Part{
			{FromMs: t0 - hour, ToMs: t0 + 3*hour, Bytes: 300}, {FromMs: t0 + 3*hour, ToMs: t0 + 7*hour, Bytes: 300}}},
		{"more parts than hours: an hour a part", 0, 0, t0, t0 + 3*hour - 1, 600, 10, []Part{
			{FromMs: 0, ToMs: t0 + hour, Bytes: 200}, {FromMs: t0 + hour, ToMs: t0 + 2*hour, Bytes: 200},
			{FromMs: t0 + 2*hour, ToMs: 0, Bytes: 200}}},
		{"hours that do not divide evenly", 0, 0, t0, t0 + 5*hour - 1, 500, 200, []Part{
			{FromMs: 0, ToMs: t0 + 2*hour, Bytes: 200}, {FromMs: t0 + 2*hour, ToMs: t0 + 4*hour, Bytes: 200},
			{FromMs: t0 + 4*hour, ToMs: 0, Bytes: 100}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Hours(tc.fromMs, tc.toMs, tc.firstMs, tc.lastMs, tc.bytes, tc.target)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Hours\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestTables(t *testing.T) {
	rng := func(path string, start, end int64) fileio.FileRange {
		return fileio.FileRange{Path: path, Start: start, End: end}
	}
	parquet := TableFile{File: File{Path: "a.parquet", Size: 1000}, RowBytes: 10,
		Blocks: []fileio.Block{{Offset: 4, Rows: 10}, {Offset: 300, Rows: 10}, {Offset: 600, Rows: 10}, {Offset: 900, Rows: 10}}}
	for _, tc := range []struct {
		name   string
		files  []TableFile
		target int64
		want   []Part
	}{
		{"no target", []TableFile{parquet}, 0, []Part{{Bytes: 400, Rows: 40}}},
		{"rows weigh within the target, whatever the file's bytes", []TableFile{parquet}, 400, []Part{{Bytes: 400, Rows: 40}}},
		{"two row groups a part, the first from byte 0, the last to the end", []TableFile{parquet}, 200, []Part{
			{Ranges: []fileio.FileRange{rng("a.parquet", 0, 600)}, Bytes: 200, Rows: 20},
			{Ranges: []fileio.FileRange{rng("a.parquet", 600, 1000)}, Bytes: 200, Rows: 20}}},
		{"a block over the target is a part of its own",
			[]TableFile{{File: File{Path: "b.avro", Size: 100}, RowBytes: 1, Blocks: []fileio.Block{{Offset: 10, Rows: 5}, {Offset: 20, Rows: 50}, {Offset: 80, Rows: 5}}}},
			20, []Part{
				{Ranges: []fileio.FileRange{rng("b.avro", 0, 20)}, Bytes: 5, Rows: 5},
				{Ranges: []fileio.FileRange{rng("b.avro", 20, 80)}, Bytes: 50, Rows: 50},
				{Ranges: []fileio.FileRange{rng("b.avro", 80, 100)}, Bytes: 5, Rows: 5}}},
		{"a Parquet row group over the target in slices of its rows",
			[]TableFile{{File: File{Path: "g.parquet", Size: 1000}, RowBytes: 10, SliceRows: true,
				Blocks: []fileio.Block{{Offset: 4, Rows: 25}, {Offset: 500, Rows: 5}, {Offset: 600, Rows: 5}}}}, 100, []Part{
				{Ranges: []fileio.FileRange{{Path: "g.parquet", Start: 0, End: 500, RowFrom: 0, RowTo: 9}}, Bytes: 90, Rows: 9},
				{Ranges: []fileio.FileRange{{Path: "g.parquet", Start: 4, End: 500, RowFrom: 9, RowTo: 18}}, Bytes: 90, Rows: 9},
				{Ranges: []fileio.FileRange{{Path: "g.parquet", Start: 4, End: 500, RowFrom: 18, RowTo: 25}}, Bytes: 70, Rows: 7},
				{Ranges: []fileio.FileRange{rng("g.parquet", 500, 1000)}, Bytes: 100, Rows: 10}}},
		{"files share a part", []TableFile{parquet, {File: File{Path: "c.parquet", Size: 50}, RowBytes: 10, Blocks: []fileio.Block{{Offset: 4, Rows: 5}}}}, 250, []Part{
			{Ranges: []fileio.FileRange{rng("a.parquet", 0, 600)}, Bytes: 200, Rows: 20},
			{Ranges: []fileio.FileRange{rng("a.parquet", 600, 1000), rng("c.parquet", 0, 50)}, Bytes: 250, Rows: 25}}},
		{"a CSV by byte ranges, weighed by its rows", []TableFile{{File: File{Path: "d.csv", Size: 1000}, RowBytes: 20, BytesPerRow: 10}}, 1000, []Part{
			{Ranges: []fileio.FileRange{rng("d.csv", 0, 500)}, Bytes: 1000},
			{Ranges: []fileio.FileRange{rng("d.csv", 500, 1000)}, Bytes: 1000}}},
		{"a compressed CSV whole", []TableFile{{File: File{Path: "e.csv.gz", Size: 100}, RowBytes: 20, BytesPerRow: 1}, {File: File{Path: "f.csv.gz", Size: 100}, RowBytes: 20, BytesPerRow: 1}}, 2000, []Part{
			{Ranges: []fileio.FileRange{rng("e.csv.gz", 0, 100)}, Bytes: 2000},
			{Ranges: []fileio.FileRange{rng("f.csv.gz", 0, 100)}, Bytes: 2000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Tables(tc.files, tc.target)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Tables\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestTableShares(t *testing.T) {
	rng := func(path string, start, end int64) fileio.FileRange {
		return fileio.FileRange{Path: path, Start: start, End: end}
	}
	shared := func(bytes, rows int64, n int, ranges ...fileio.FileRange) []Part {
		var out []Part
		for s := range n {
			p := Part{Bytes: bytes, Rows: rows, Share: s, Shares: n}
			for _, r := range ranges {
				r.Share, r.Shares = s, n
				p.Ranges = append(p.Ranges, r)
			}
			out = append(out, p)
		}
		return out
	}
	// Five row groups of 10 rows, 10 bytes a row: a part each at 100.
	five := TableFile{File: File{Path: "a.parquet", Size: 1000}, RowBytes: 10,
		Blocks: []fileio.Block{{Offset: 4, Rows: 10}, {Offset: 200, Rows: 10}, {Offset: 400, Rows: 10}, {Offset: 600, Rows: 10}, {Offset: 800, Rows: 10}}}
	// One row group of 30 rows and one of 10: slices of 10 rows at 100.
	sliced := TableFile{File: File{Path: "g.parquet", Size: 1000}, RowBytes: 10, SliceRows: true,
		Blocks: []fileio.Block{{Offset: 4, Rows: 30}, {Offset: 600, Rows: 10}}}
	const h = 3_600_000
	for _, tc := range []struct {
		name   string
		files  []TableFile
		spans  map[int64]PartSpan
		target int64
		want   []Part
	}{
		{"hours in order, each across two parts at most: the parts as they are", []TableFile{five},
			map[int64]PartSpan{0: {0, 1}, h: {1, 2}, 2 * h: {2, 2}, 3 * h: {3, 4}}, 100, Tables([]TableFile{five}, 100)},
		{"one hour across every part: shares of them all, every file whole", []TableFile{five},
			map[int64]PartSpan{0: {0, 4}}, 100, shared(500, 50, 10, rng("a.parquet", 0, 1000))},
		{"an hour across three parts: those parts in shares, the others as they are", []TableFile{five},
			map[int64]PartSpan{0: {0, 0}, h: {1, 3}, 2 * h: {3, 4}}, 100, append(append(
				[]Part{Tables([]TableFile{five}, 100)[0]},
				shared(300, 30, 6, rng("a.parquet", 200, 800))...),
				Tables([]TableFile{five}, 100)[4])},
		{"a row group's slices join whole", []TableFile{sliced},
			map[int64]PartSpan{0: {1, 3}}, 100, shared(400, 40, 8, rng("g.parquet", 0, 1000))},
		{"a row group's slices join whole, and the part after stays", []TableFile{sliced},
			map[int64]PartSpan{0: {0, 2}, h: {2, 3}}, 100, append(shared(300, 30, 6, rng("g.parquet", 0, 600)), Tables([]TableFile{sliced}, 100)[3])},
		{"a compressed file heavier than a part: shares of it", []TableFile{{File: File{Path: "e.csv.gz", Size: 100}, RowBytes: 20, BytesPerRow: 1}},
			nil, 500, shared(2000, 0, 8, rng("e.csv.gz", 0, 100))},
		{"no target", []TableFile{five}, map[int64]PartSpan{0: {0, 4}}, 0, Tables([]TableFile{five}, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TableShares(tc.files, Tables(tc.files, tc.target), tc.spans, tc.target)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("TableShares\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestRefine(t *testing.T) {
	// Two samples: "m" at 100 bytes, the table's end at 400.
	samples := []bigtableio.KeySample{ks("m", 100), ks("", 400)}
	rows := map[[2]string][]string{
		{"", "m"}: {"a", "b", "c", "d"},
		{"m", ""}: {"m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x"},
	}
	var listed [][2]string
	keys := func(start, end string) ([]string, error) {
		listed = append(listed, [2]string{start, end})
		return rows[[2]string{start, end}], nil
	}
	got, err := Refine(samples, 100, keys)
	if err != nil {
		t.Fatal(err)
	}
	// Only the chunk over 100 bytes is listed; its 12 rows weigh 25 bytes
	// each, and a key is kept every 25 bytes (size/4).
	if want := [][2]string{{"m", ""}}; !reflect.DeepEqual(listed, want) {
		t.Errorf("listed %v, want %v", listed, want)
	}
	want := []bigtableio.KeySample{ks("m", 100), ks("", 400), ks("n", 125), ks("o", 150), ks("p", 175), ks("q", 200), ks("r", 225),
		ks("s", 250), ks("t", 275), ks("u", 300), ks("v", 325), ks("w", 350), ks("x", 375)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Refine\n got %v\nwant %v", got, want)
	}
	kr := func(start, end string) bigtableio.KeyRange { return bigtableio.KeyRange{Start: start, End: end} }
	if parts, want := Keys(got, 100), []Part{{Keys: kr("", "m"), Bytes: 100}, {Keys: kr("m", "q"), Bytes: 100}, {Keys: kr("q", "u"), Bytes: 100},
		{Keys: kr("u", ""), Bytes: 100}}; !reflect.DeepEqual(parts, want) {
		t.Errorf("Keys of the refined samples\n got %+v\nwant %+v", parts, want)
	}
	if _, err := Refine(samples, 100, func(string, string) ([]string, error) { return nil, io.ErrUnexpectedEOF }); err == nil {
		t.Error("a failed listing: no error")
	}
	if got, _ := Refine(samples, 0, keys); !reflect.DeepEqual(got, samples) {
		t.Errorf("no size: %v", got)
	}
}
