package main

import (
	"fmt"
	"strings"

	"github.com/sensorpipe/sensorpipe/launch/bench"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// dataset is what the benchmark publishes and reads back, all taken from
// the default built-in spec (schemas.DefaultSpecName): its readings
// (bench.Lines), its first Bigtable table, and the probe cell that shows a
// reading landed: the first column of that table holding a required field,
// so every valid reading has it.
type dataset struct {
	spec              *schemas.Spec
	builder           *hours.Builder
	parser            *codec.Parser
	lines             *bench.Lines
	table             string // Bigtable table
	family, qualifier string // the probe cell's column
}

// target is the benchmark's dataset.
var target = func() *dataset {
	d, err := newDataset(schemas.DefaultSpecName())
	if err != nil {
		panic(fmt.Sprintf("stream bench: default spec: %v", err))
	}
	return d
}()

func newDataset(name string) (*dataset, error) {
	spec, err := schemas.BuiltinSpec(name)
	if err != nil {
		return nil, err
	}
	c, err := hours.Compile(spec, hours.CompileOptions{})
	if err != nil {
		return nil, err
	}
	lines, err := bench.Workload{Sensors: maxSensors, Spec: c.Spec}.Lines()
	if err != nil {
		return nil, err
	}
	d := &dataset{spec: c.Spec, builder: c.Builder(), parser: codec.NewParser(c.Spec), lines: lines, table: c.Spec.Bigtable.Tables[0].Name}
	for _, fam := range c.Spec.Bigtable.Tables[0].Families {
		for _, col := range fam.Columns {
			if f := c.Spec.Field(col.Value); d.family == "" && !strings.Contains(col.Qualifier, "{") && f != nil && f.Required && !contains(c.Spec.Identity, f.Name) && f.Name != c.Spec.EventTime {
				d.family, d.qualifier = fam.Name, col.Qualifier
			}
		}
	}
	if d.family == "" {
		return nil, fmt.Errorf("spec %s: table %s has no fixed-qualifier column of a required field to probe", name, d.table)
	}
	return d, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// rowKey is the row key of sensor's reading at eventMs in the table.
func (d *dataset) rowKey(sensor int, eventMs int64) string {
	recs, err := d.parser.Parse(nil, d.lines.AppendAt(nil, sensor, eventMs), "bench")
	if err != nil || len(recs) != 1 {
		panic(fmt.Sprintf("stream bench: generated reading does not parse: %v", err))
	}
	return d.builder.RowKeys(d.table, recs)[0]
}

// keyPrefix is the start of sensor's row keys: the part before the first
// delimiter (the identity, when the row key starts with it).
func (d *dataset) keyPrefix(sensor int) string {
	p, _, _ := strings.Cut(d.rowKey(sensor, bench.DefaultStart.UnixMilli()), d.spec.KeyDelimiter)
	return p
}

// cell names the probe column, family:qualifier.
func (d *dataset) cell() string { return d.family + ":" + d.qualifier }
