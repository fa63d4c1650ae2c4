package dofns

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/readside/readpath"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

// BenchmarkStreamMergeClosedHour is what --merge_stored adds to a stream's
// final firing, per closed sensor-hour: the hour read back from Bigtable
// (the emulator, on this machine) and built with what the stream holds
// (hours.Compiled.FinalFiring with the read-back readings), against the
// same firing from the held readings alone. The hour has 360 vitals
// readings (one every 10 s, every fourth heart rate missing), all stored
// on arrival; one stream holds all of them (the read-back finds nothing
// new: the cost in the common case), or two streams share the
// subscription and this one holds half. One op is one closed sensor-hour.
func BenchmarkStreamMergeClosedHour(b *testing.B) {
	host := emulators.StartBigtable(b) // skips under -short
	b.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx := context.Background()
	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		b.Fatal(err)
	}
	spec := hours.MustCompile(loaded, hours.CompileOptions{})
	if err := bigtableio.EnsureTables(ctx, "p", "i", spec.Spec, true, time.Minute); err != nil {
		b.Fatal(err)
	}
	start := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	p := codec.NewParser(spec.Spec)
	var recs []schemas.Record
	for i := 0; i < 360; i++ {
		reading := map[string]any{"sensor_id": "bench-1", "timestamp": start.Add(time.Duration(i) * 10 * time.Second).UnixMilli(),
			"body_temperature": 36.8, "spO2": 98, "battery_level": 87}
		if i%4 != 0 {
			reading["heart_rate"] = 60 + i%30
		}
		line, _ := json.Marshal(reading)
		if recs, err = p.Parse(recs, line, "sub"); err != nil {
			b.Fatal(err)
		}
	}
	var half []schemas.Record
	for i := range recs {
		if i%2 == 0 {
			half = append(half, recs[i])
		}
	}
	// What the streams stored: each reading's own cells, written on
	// arrival.
	arrival := make([]schemas.Record, len(recs))
	for i := range recs {
		arrival[i] = hours.ArrivalRecord(spec.Spec, recs[i])
	}
	muts, _ := spec.Builder().Build(arrival, false, func(int) hours.OriginKind { return hours.OriginProvisional })
	c, err := bigtableio.NewClient(ctx, "p", "i")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := readpath.WriteMutations(ctx, c, muts); err != nil {
		b.Fatal(err)
	}
	RegisterStores(Stores{OpenTables: func(ctx context.Context, project, instance string) (TableReader, error) {
		r, err := bigtableio.OpenReader(ctx, project, instance)
		if err != nil {
			return nil, err
		}
		return r, nil
	}})
	r, err := openReadBacker(ctx, spec, Recovery{Project: "p", Instance: "i"})
	if err != nil {
		b.Fatal(err)
	}
	defer r.close()
	identity := group.IdentityKey(spec.Spec, &recs[0])
	pane := hours.HourPane{StartMs: start.UnixMilli(), EndMs: start.Add(time.Hour).UnixMilli(), Pane: hours.Pane{Timing: hours.PaneOnTime}}

	for _, bc := range []struct {
		name  string
		held  []schemas.Record
		merge bool
	}{
		{"one_stream/held_only", recs, false},
		{"one_stream/read_back_and_merge", recs, true},
		{"two_streams/read_back_and_merge", half, true},
	} {
		chunk := packed.AppendHeld(spec.Spec, nil, bc.held)
		b.Run(bc.name, func(b *testing.B) {
			var built int
			for i := 0; i < b.N; i++ {
				prev, err := packed.DecodeHeld(spec.Spec, nil, chunk)
				if err != nil {
					b.Fatal(err)
				}
				var stored []schemas.Record
				if bc.merge {
					if stored, _, err = r.window(ctx, identity, pane.StartMs, pane.EndMs); err != nil {
						b.Fatal(err)
					}
				}
				_, out := hours.FinalFiring(spec, pane, prev, stored, hours.FinalState{}, false, 0, true, time.Now().UnixMilli())
				built = len(out.BQ)
			}
			if built != len(recs) {
				b.Fatalf("the firing built %d readings; want %d", built, len(recs))
			}
		})
	}
}
