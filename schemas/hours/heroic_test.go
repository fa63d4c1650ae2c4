package hours

import (
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

// Heroic's worked example of its Bigtable layout
// (https://spotify.github.io/heroic/docs/data_model, row key and
// qualifier), in Heroic's write format, one JSON object per line.
const (
	heroicFirst  = `{"series":{"key":"system","tags":{"site":"gew","what":"cpu-idle-percentage","system-component":"cpu","cpu-type":"idle","unit":"%"},"resource":{"podname":"pod-example-123-abc","host":"database.example.com"}},"data":{"type":"points","data":[[1300000000000,42.0]]}}`
	heroicSecond = `{"series":{"key":"system","tags":{"site":"gew","what":"cpu-idle-percentage","system-component":"cpu","cpu-type":"idle","unit":"%"},"resource":{"podname":"pod-example-123-abc","host":"database.example.com"}},"data":{"type":"points","data":[[1300001000000,84.0]]}}`
	heroicRowKey = "system,cpu-type=idle,site=gew,system-component=cpu,unit=%,what=cpu-idle-percentage,1297080123392,database.example.com,pod-example-123-abc"
)

func TestHeroicReproducesItsWorkedExample(t *testing.T) {
	s, err := spectest.Load("heroic_metrics")
	if err != nil {
		t.Fatal(err)
	}
	p := codec.NewParser(s)
	var recs []schemas.Record
	for _, l := range []string{heroicFirst, heroicSecond} {
		if recs, err = p.Parse(recs, []byte(l), "seed"); err != nil {
			t.Fatal(err)
		}
	}
	b, err := NewBuilder(s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := b.Check(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	kept, _ := group.Prepare(s, recs)
	muts, rej := b.Mutations(kept)
	if len(rej) > 0 {
		t.Fatal(rej[0].Err)
	}
	if len(muts) != 1 {
		t.Fatalf("got %d rows, want the two points in one row: %+v", len(muts), muts)
	}
	if muts[0].RowKey != heroicRowKey {
		t.Errorf("row key\n got %s\nwant %s", muts[0].RowKey, heroicRowKey)
	}
	want := []Cell{
		{Family: "points", Qualifier: "2919876608", TsMicros: 1300000000000000, Value: []byte("42")},
		{Family: "points", Qualifier: "2920876608", TsMicros: 1300001000000000, Value: []byte("84")},
	}
	if len(muts[0].Cells) != len(want) {
		t.Fatalf("cells = %+v, want %+v", muts[0].Cells, want)
	}
	for i, c := range muts[0].Cells {
		w := want[i]
		if c.Family != w.Family || c.Qualifier != w.Qualifier || c.TsMicros != w.TsMicros || string(c.Value) != string(w.Value) {
			t.Errorf("cell %d = %+v (%s), want %+v (%s)", i, c, c.Value, w, w.Value)
		}
	}
}

func TestHeroicExplodesPoints(t *testing.T) {
	s, err := spectest.Load("heroic_metrics")
	if err != nil {
		t.Fatal(err)
	}
	line := `{"series":{"key":"k","tags":{"a":"1"}},"data":{"type":"points","data":[[1300000000000,1],[1300000060000,2.5]]}}`
	recs, err := codec.NewParser(s).Parse(nil, []byte(line), "t")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewBuilder(s)
	muts, rej := b.Mutations(recs)
	if len(rej) > 0 || len(muts) != 1 || len(muts[0].Cells) != 2 {
		t.Fatalf("muts = %+v, rejected %v; want one row with two cells", muts, rej)
	}
	if got := muts[0].RowKey; got != "k,a=1,1297080123392," {
		t.Errorf("row key = %q, want k,a=1,1297080123392, (no resource: empty)", got)
	}
}
