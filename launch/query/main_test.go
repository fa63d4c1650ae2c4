package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/internal/emulators"
	"github.com/sensorpipe/sensorpipe/internal/readpath"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func TestPlanOnly(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--schema", "vitals", "--where", "sensor_id=s1", "--since", "1h", "--now", "2026-03-01T10:20:00Z", "--plan"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var s summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Table != "patient_vitals" || s.Scan != "range" || len(s.Ranges) != 1 ||
		s.Ranges[0].Start != "s1#2026-03-01T09" || s.Ranges[0].End != "s1#2026-03-01T11" {
		t.Errorf("plan = %+v", s)
	}
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no schema", []string{"--where", "sensor_id=s1"}, "--schema is required"},
		{"bad where", []string{"--schema", "vitals", "--where", "sensor_id"}, "want field=value"},
		{"bad since", []string{"--schema", "vitals", "--where", "sensor_id=s1", "--since", "soon"}, "--since"},
		{"bad now", []string{"--schema", "vitals", "--where", "sensor_id=s1", "--now", "noon"}, "--now"},
		{"unknown field", []string{"--schema", "vitals", "--where", "nope=1"}, "not a field"},
		{"unknown spec", []string{"--schema", "nope"}, "unknown spec"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errb)
			if err == nil || !strings.Contains(err.Error()+errb.String(), tc.want) {
				t.Errorf("err = %v, stderr %q; want %q", err, errb.String(), tc.want)
			}
		})
	}
}

func TestUnreachableBigtable(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a connection timeout")
	}
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--schema", "vitals", "--where", "sensor_id=s1", "--timeout", "2s"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "reachable") {
		t.Errorf("err = %v, want a one-line unreachable error", err)
	}
}

// TestQueryEmulator writes a vitals reading set into a Bigtable emulator and
// runs the command: the seed's primary query reads at most 2 rows and prints
// the cells of the last hour and a summary with the ranges.
func TestQueryEmulator(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec, err := schemas.LoadSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := bigtable.NewAdminClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	client, err := bigtable.NewClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := readpath.CreateTables(ctx, admin, spec); err != nil {
		t.Fatal(err)
	}
	p := schemas.NewParser(spec)
	var recs []schemas.Record
	for _, ts := range []string{"2026-03-01T08:50:00Z", "2026-03-01T09:10:00Z", "2026-03-01T09:40:00Z", "2026-03-01T10:05:00Z"} {
		for _, sensor := range []string{"s1", "s2"} {
			line := `{"sensor_id":"` + sensor + `","timestamp":"` + ts + `","heart_rate":70,"body_temperature":36.6,"spO2":98,"battery_level":80}`
			if recs, err = p.Parse(recs, []byte(line), "t"); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, _ := schemas.NewBuilder(spec)
	muts, _ := b.Mutations(recs)
	if err := readpath.WriteMutations(ctx, client, muts); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err = run(ctx, []string{"--schema", "vitals", "--where", "sensor_id=s1", "--since", "1h", "--now", "2026-03-01T10:20:00Z",
		"--bigtable_project", "p", "--bigtable_instance", "i"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var s summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatal(err)
	}
	// 09:10 is outside the window 09:20-10:20; 09:40 and 10:05 are in: two
	// rows, 4 cells each (the imputed flag is unset without PrepareGroup).
	if s.RowsRead != 2 || s.Cells != 8 || len(lines) != 9 || len(s.Ranges) != 1 {
		t.Errorf("summary = %+v with %d lines, want 2 rows, 8 cells, 1 range", s, len(lines))
	}
	if !strings.Contains(lines[0], `"row_key":"s1#2026-03-01T09"`) {
		t.Errorf("first cell = %s", lines[0])
	}
}
