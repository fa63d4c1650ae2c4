package parts

import (
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/fileio"
	"github.com/sensorpipe/sensorpipe/internal/lines"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

const hour = int64(time.Hour / time.Millisecond)

func TestPlan(t *testing.T) {
	one := []File{{Path: "a", Size: 100}}
	for _, tc := range []struct {
		name   string
		files  []File
		spans  map[int64]Span
		target int64
		want   []Part
	}{
		{
			name:  "input no larger than the target: one part, every file whole",
			files: one, target: 100,
			spans: map[int64]Span{0: {0, 40}, hour: {50, 90}},
			want:  []Part{{Bytes: 100}},
		},
		{
			name:  "no target: one part",
			files: one, target: 0,
			spans: map[int64]Span{0: {0, 40}, hour: {50, 90}},
			want:  []Part{{Bytes: 100}},
		},
		{
			name:  "hours in order: each part ends at the last hour start within the target",
			files: one, target: 50,
			spans: map[int64]Span{0: {0, 30}, hour: {35, 45}, 2 * hour: {60, 90}},
			want: []Part{
				{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 35}}, Bytes: 35},
				{Ranges: []fileio.FileRange{{Path: "a", Start: 35, End: 60}}, Bytes: 25},
				{Ranges: []fileio.FileRange{{Path: "a", Start: 60, End: 100}}, Bytes: 40},
			},
		},
		{
			name:  "a late reading holds the cut back until its hour has ended",
			files: one, target: 50,
			// Hour 0's last reading comes after hour 1 started at 35 and
			// hour 2 at 52: the first place to cut is hour 3 at 80.
			spans: map[int64]Span{0: {0, 70}, hour: {35, 60}, 2 * hour: {52, 75}, 3 * hour: {80, 95}},
			want: []Part{
				{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 80}}, Bytes: 80},
				{Ranges: []fileio.FileRange{{Path: "a", Start: 80, End: 100}}, Bytes: 20},
			},
		},
		{
			name:  "hours overlapping throughout (shuffled input): one part",
			files: one, target: 10,
			spans: map[int64]Span{0: {0, 98}, hour: {2, 99}, 2 * hour: {5, 97}},
			want:  []Part{{Bytes: 100}},
		},
		{
			name:  "an hour larger than the target is a part of its own",
			files: one, target: 20,
			spans: map[int64]Span{0: {0, 5}, hour: {10, 70}, 2 * hour: {80, 90}},
			want: []Part{
				{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 10}}, Bytes: 10},
				{Ranges: []fileio.FileRange{{Path: "a", Start: 10, End: 80}}, Bytes: 70},
				{Ranges: []fileio.FileRange{{Path: "a", Start: 80, End: 100}}, Bytes: 20},
			},
		},
		{
			name:   "parts across files, a compressed file whole in one part",
			files:  []File{{Path: "a", Size: 40}, {Path: "b.gz", Size: 20}, {Path: "c", Size: 40}},
			target: 35,
			// a (0-40): hours 0 and 1; b.gz (40-60, its lines all at 40):
			// hour 2; c (60-100): hours 2 and 3. Places to cut: 20, 40 and
			// 75.
			spans: map[int64]Span{0: {0, 15}, hour: {20, 35}, 2 * hour: {40, 70}, 3 * hour: {75, 95}},
			want: []Part{
				{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 20}}, Bytes: 20},
				{Ranges: []fileio.FileRange{{Path: "a", Start: 20, End: 40}}, Bytes: 20},
				{Ranges: []fileio.FileRange{{Path: "b.gz", Start: 0, End: 20}, {Path: "c", Start: 0, End: 15}}, Bytes: 35},
				{Ranges: []fileio.FileRange{{Path: "c", Start: 15, End: 40}}, Bytes: 25},
			},
		},
		{
			name:   "an empty compressed file at the end goes with the last part",
			files:  []File{{Path: "a", Size: 100}, {Path: "z.gz", Size: 0}},
			target: 50,
			spans:  map[int64]Span{0: {0, 40}, hour: {50, 90}},
			want: []Part{
				{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 50}}, Bytes: 50},
				{Ranges: []fileio.FileRange{{Path: "a", Start: 50, End: 100}, {Path: "z.gz", Start: 0, End: 1}}, Bytes: 50},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(tc.files, tc.spans, tc.target)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Plan:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestScanFindsEachHoursSpan scans real files (plain with a byte-order mark
// and CRLF ends, and gzip) with the vitals spec's parser: every parsed
// reading's hour gets the offsets of its first and last line, bad and
// too-long lines none; each file's line index holds each line's identity
// hash (0 for a line without a reading).
func TestScanFindsEachHoursSpan(t *testing.T) {
	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := hours.Compile(loaded, hours.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	line := func(sensor string, ms int64) string {
		return fmt.Sprintf(`{"sensor_id":%q,"timestamp":%q,"heart_rate":70,"body_temperature":36.5,"spO2":95,"battery_level":90}`, sensor, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
	}
	plain := []string{
		"\xef\xbb\xbf" + line("s1", 10), // offset 0
		"not json",
		line("s2", hour+5),
		line("s1", 20),
		strings.Repeat("x", 400), // over the line limit
	}
	var text string
	var offs []int64
	for _, l := range plain {
		offs = append(offs, int64(len(text)))
		text += l + "\r\n"
	}
	a := filepath.Join(dir, "a.jsonl")
	if err := os.WriteFile(a, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(dir, "b.jsonl.gz")
	f, err := os.Create(b)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	fmt.Fprintln(zw, line("s3", 2*hour))
	fmt.Fprintln(zw, line("s3", hour+9))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	files, err := List(context.Background(), filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != a || files[1].Path != b {
		t.Fatalf("List: %+v", files)
	}
	sc, err := Scan(context.Background(), files, spec, ScanOptions{MaxLine: 300, IndexDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got := sc.Spans
	gz := files[0].Size // the gzip file's lines are all at its start
	want := map[int64]Span{
		0:        {First: offs[0], Last: offs[3]},
		hour:     {First: offs[2], Last: gz},
		2 * hour: {First: gz, Last: gz},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Scan: got %v, want %v", got, want)
	}
	if sc.Mixed {
		t.Error("Scan: Mixed, but every line holds one reading")
	}
	s1, s2, s3 := lines.IdentityHash("s1"), lines.IdentityHash("s2"), lines.IdentityHash("s3")
	if s1 == s2 || s2 == s3 || s1 == s3 {
		t.Fatalf("the test's sensors hash alike: %d %d %d", s1, s2, s3)
	}
	gzLine := int64(len(line("s3", 2*hour)) + 1) // the second line's offset, decompressed
	for _, tc := range []struct {
		file  File
		offs  []int64
		bytes []byte
	}{
		{files[0], append(offs, offs[4]+402), []byte{s1, 0, s2, s1, 0, 0}},
		{files[1], []int64{0, gzLine, gzLine + 1000}, []byte{s3, s3, 0}},
	} {
		x, err := lines.OpenIndex(sc.Index[tc.file.Path])
		if err != nil {
			t.Fatal(err)
		}
		for i, off := range tc.offs {
			b, ok, err := x.Byte(off)
			if err != nil || b != tc.bytes[i] || ok != (i < len(tc.offs)-1) {
				t.Errorf("%s: index at %d: %d, %v, %v; want %d", tc.file.Path, off, b, ok, err, tc.bytes[i])
			}
		}
		x.Close()
	}
}

func TestShare(t *testing.T) {
	files := []File{{Path: "a", Size: 100}, {Path: "b.gz", Size: 30}}
	index := map[string]string{"a": "/x/0.index", "b.gz": "/x/1.index"}
	for _, tc := range []struct {
		name   string
		plan   []Part
		index  map[string]string
		target int64
		want   []Part
	}{
		{
			name:  "parts within the target stay as they are",
			index: index, target: 80,
			plan: []Part{{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 60}}, Bytes: 60}},
			want: []Part{{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 60}}, Bytes: 60}},
		},
		{
			name:  "a part over the target: ceil(2 bytes/target) shares, each reading its ranges",
			index: index, target: 50,
			plan: []Part{
				{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 20}}, Bytes: 20},
				{Ranges: []fileio.FileRange{{Path: "a", Start: 20, End: 80}}, Bytes: 60},
			},
			want: append([]Part{{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 20}}, Bytes: 20}},
				shares(Part{Ranges: []fileio.FileRange{{Path: "a", Start: 20, End: 80, Index: "/x/0.index"}}, Bytes: 60}, 3)...),
		},
		{
			name:  "the whole input as one part (shuffled): every file, in shares",
			index: index, target: 100,
			plan: []Part{{Bytes: 130}},
			want: shares(Part{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 100, Index: "/x/0.index"}, {Path: "b.gz", Start: 0, End: 30, Index: "/x/1.index"}}, Bytes: 130}, 3),
		},
		{
			name:  "at most one share per hash byte",
			index: index, target: 1,
			plan: []Part{{Ranges: []fileio.FileRange{{Path: "a", Start: 0, End: 100}}, Bytes: 1000}},
		},
		{
			name:  "a file without an index: the part stays whole",
			index: map[string]string{"a": "/x/0.index"}, target: 100,
			plan: []Part{{Bytes: 130}},
			want: []Part{{Bytes: 130}},
		},
		{
			name:  "no target: as planned",
			index: index, target: 0,
			plan: []Part{{Bytes: 130}},
			want: []Part{{Bytes: 130}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Share(files, tc.plan, tc.index, tc.target)
			if tc.want == nil {
				if len(got) != 256 || got[255].Share != 255 || got[255].Ranges[0].Shares != 256 {
					t.Fatalf("Share: %d parts, want 256", len(got))
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Share:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// shares is p as n shares.
func shares(p Part, n int) []Part {
	var out []Part
	for s := range n {
		q := p
		q.Share, q.Shares = s, n
		q.Ranges = nil
		for _, r := range p.Ranges {
			r.Share, r.Shares = s, n
			q.Ranges = append(q.Ranges, r)
		}
		out = append(out, q)
	}
	return out
}

// TestScanMixed: a line whose readings have identities of different hash
// bytes (a spec that explodes a line into points, with the point's value in
// its identity) marks the input Mixed, so it is never split by identity.
func TestScanMixed(t *testing.T) {
	heroic, err := os.ReadFile("../../schemas/specs/heroic_metrics.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(heroic), "identity: [key, tags, resource]", "identity: [key, value]", 1)
	loaded, err := schemas.ParseSpec("mixed.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := hours.Compile(loaded, hours.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	point := func(values ...int) string {
		var pts []string
		for i, v := range values {
			pts = append(pts, fmt.Sprintf("[%d,%d]", 1300000000000+int64(i), v))
		}
		return `{"series":{"key":"cpu","tags":{"host":"a"}},"data":{"type":"points","data":[` + strings.Join(pts, ",") + `]}}`
	}
	for _, tc := range []struct {
		name  string
		line  string
		mixed bool
	}{
		{"one point a line", point(1), false},
		{"points of one identity", point(1, 1, 1), false},
		{"points of two identities", point(1, 2), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := spec.Decoder().ParseString(nil, tc.line, "in")
			if err != nil {
				t.Fatal(err)
			}
			hashes := map[byte]bool{}
			for i := range recs {
				hashes[lines.IdentityHash(group.IdentityKey(spec.Spec, &recs[i]))] = true
			}
			if (len(hashes) > 1) != tc.mixed {
				t.Fatalf("the line's %d readings hash to %d bytes", len(recs), len(hashes))
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "in.jsonl")
			if err := os.WriteFile(path, []byte(tc.line+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			sc, err := Scan(context.Background(), []File{{Path: path, Size: int64(len(tc.line) + 1)}}, spec, ScanOptions{MaxLine: 1 << 20, IndexDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if len(sc.Spans) != 1 {
				t.Fatalf("the line did not parse: %v", sc.Spans)
			}
			if sc.Mixed != tc.mixed {
				t.Errorf("Mixed = %v, want %v", sc.Mixed, tc.mixed)
			}
		})
	}
}
