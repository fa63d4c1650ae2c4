package parts

import (
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/schemas"
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
				{Ranges: []dofns.FileRange{{Path: "a", Start: 0, End: 35}}, Bytes: 35},
				{Ranges: []dofns.FileRange{{Path: "a", Start: 35, End: 60}}, Bytes: 25},
				{Ranges: []dofns.FileRange{{Path: "a", Start: 60, End: 100}}, Bytes: 40},
			},
		},
		{
			name:  "a late reading holds the cut back until its hour has ended",
			files: one, target: 50,
			// Hour 0's last reading comes after hour 1 started at 35 and
			// hour 2 at 52: the first place to cut is hour 3 at 80.
			spans: map[int64]Span{0: {0, 70}, hour: {35, 60}, 2 * hour: {52, 75}, 3 * hour: {80, 95}},
			want: []Part{
				{Ranges: []dofns.FileRange{{Path: "a", Start: 0, End: 80}}, Bytes: 80},
				{Ranges: []dofns.FileRange{{Path: "a", Start: 80, End: 100}}, Bytes: 20},
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
				{Ranges: []dofns.FileRange{{Path: "a", Start: 0, End: 10}}, Bytes: 10},
				{Ranges: []dofns.FileRange{{Path: "a", Start: 10, End: 80}}, Bytes: 70},
				{Ranges: []dofns.FileRange{{Path: "a", Start: 80, End: 100}}, Bytes: 20},
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
				{Ranges: []dofns.FileRange{{Path: "a", Start: 0, End: 20}}, Bytes: 20},
				{Ranges: []dofns.FileRange{{Path: "a", Start: 20, End: 40}}, Bytes: 20},
				{Ranges: []dofns.FileRange{{Path: "b.gz", Start: 0, End: 20}, {Path: "c", Start: 0, End: 15}}, Bytes: 35},
				{Ranges: []dofns.FileRange{{Path: "c", Start: 15, End: 40}}, Bytes: 25},
			},
		},
		{
			name:   "an empty compressed file at the end goes with the last part",
			files:  []File{{Path: "a", Size: 100}, {Path: "z.gz", Size: 0}},
			target: 50,
			spans:  map[int64]Span{0: {0, 40}, hour: {50, 90}},
			want: []Part{
				{Ranges: []dofns.FileRange{{Path: "a", Start: 0, End: 50}}, Bytes: 50},
				{Ranges: []dofns.FileRange{{Path: "a", Start: 50, End: 100}, {Path: "z.gz", Start: 0, End: 1}}, Bytes: 50},
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
// reading's hour gets the offsets of its first and last line, bad lines
// none.
func TestScanFindsEachHoursSpan(t *testing.T) {
	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := schemas.Compile(loaded, schemas.CompileOptions{})
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
	got, err := Scan(context.Background(), files, spec.Decoder(), 1<<20, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	gz := files[0].Size // the gzip file's lines are all at its start
	want := map[int64]Span{
		0:        {First: offs[0], Last: offs[3]},
		hour:     {First: offs[2], Last: gz},
		2 * hour: {First: gz, Last: gz},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Scan: got %v, want %v", got, want)
	}
}
