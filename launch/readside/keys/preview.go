// Package keys is the row-key design toolkit behind `launch/keys`: a preview
// of the cells a spec writes for some input, and a hot-spot simulation of
// those writes over Bigtable-style tablets with a Key Visualizer-style
// heatmap. The key rules themselves (templates, lint, ranges) live in the
// pure package schemas; this package reads input and renders reports.
package keys

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// PreviewCell is one cell of a preview line.
type PreviewCell struct {
	Family          string `json:"family"`
	Qualifier       string `json:"qualifier"`
	TimestampMicros int64  `json:"timestamp_micros"`
	// Value is the cell's bytes as text; ValueBase64 replaces it when the
	// bytes are not UTF-8 (an int64be counter, say).
	Value       *string `json:"value,omitempty"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

// PreviewRow is one row a record writes in one table.
type PreviewRow struct {
	Table  string        `json:"table"`
	RowKey string        `json:"row_key"`
	Cells  []PreviewCell `json:"cells"`
}

// PreviewReject is an input record that would be dead-lettered.
type PreviewReject struct {
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

// ReasonDuplicate marks a reading dropped because an earlier one has the
// same identity and millisecond (the pipeline keeps one of them).
const ReasonDuplicate = "duplicate"

// readingRef is one parsed record and the input order it came in.
type readingRef struct {
	seq int // order of the record in the input
	rec schemas.Record
}

// Preview reads input lines (one JSON object each) and writes one JSON line
// per input record to out: for every table the record feeds, its table, row
// key and cells; or, for a record the pipeline would dead-letter, its reason
// and error. Records are grouped per identity and UTC hour and prepared as
// the pipeline prepares them (duplicates dropped, missing values imputed),
// so the cells are the ones the pipeline writes. A line that does not parse
// is one reject; a line Heroic-style exploded into several points gives one
// output line per point and table.
func Preview(spec *schemas.Spec, in io.Reader, out io.Writer) (rows, rejects int, err error) {
	parser := codec.NewParser(spec)
	builder, err := hours.NewBuilder(spec)
	if err != nil {
		return 0, 0, fmt.Errorf("build %s: %w", spec.Name, err)
	}
	type outcome struct {
		reject *PreviewReject
		rows   []PreviewRow
	}
	var (
		results []outcome
		groups  = map[string][]readingRef{}
		order   []string
	)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var recs []schemas.Record
	for sc.Scan() {
		recs, err = parser.Parse(recs[:0], sc.Bytes(), "preview")
		if err != nil {
			results = append(results, outcome{reject: rejectOf(err)})
			continue
		}
		for i := range recs {
			r := recs[i]
			if err := builder.Check(&r); err != nil {
				results = append(results, outcome{reject: rejectOf(err)})
				continue
			}
			g := group.IdentityKey(spec, &r) + "\x00" + fmt.Sprint(floorDiv(r.EventMs, 3600_000))
			if _, ok := groups[g]; !ok {
				order = append(order, g)
			}
			groups[g] = append(groups[g], readingRef{seq: len(results), rec: r})
			results = append(results, outcome{})
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("read input: %w", err)
	}
	for _, g := range order {
		refs := groups[g]
		// Carry each record's input position through group.Prepare in Source.
		batch := make([]schemas.Record, len(refs))
		for i, ref := range refs {
			batch[i] = ref.rec
			batch[i].Source = strconv.Itoa(ref.seq)
		}
		kept, _ := group.Prepare(spec, batch)
		keptSeq := map[string]bool{}
		for i := range kept {
			keptSeq[kept[i].Source] = true
			seq, _ := strconv.Atoi(kept[i].Source)
			muts, errs := builder.Mutations(kept[i : i+1])
			if len(errs) > 0 {
				results[seq] = outcome{reject: rejectOf(errs[0].Err)}
				continue
			}
			results[seq].rows = previewRows(muts)
		}
		for _, ref := range refs {
			if !keptSeq[strconv.Itoa(ref.seq)] {
				results[ref.seq] = outcome{reject: &PreviewReject{Reason: ReasonDuplicate, Error: "same identity and event millisecond as another reading; the pipeline keeps one"}}
			}
		}
	}
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, res := range results {
		if res.reject != nil {
			rejects++
			if err := enc.Encode(res.reject); err != nil {
				return rows, rejects, err
			}
			continue
		}
		for _, r := range res.rows {
			rows++
			if err := enc.Encode(r); err != nil {
				return rows, rejects, err
			}
		}
	}
	return rows, rejects, w.Flush()
}

func rejectOf(err error) *PreviewReject {
	return &PreviewReject{Reason: schemas.Reason(err), Error: err.Error()}
}

func previewRows(muts []hours.RowMutation) []PreviewRow {
	var out []PreviewRow
	for _, m := range muts {
		row := PreviewRow{Table: m.Table, RowKey: m.RowKey, Cells: []PreviewCell{}}
		for _, c := range m.Cells {
			pc := PreviewCell{Family: c.Family, Qualifier: c.Qualifier, TimestampMicros: c.TsMicros}
			if utf8.Valid(c.Value) {
				v := string(c.Value)
				pc.Value = &v
			} else {
				pc.ValueBase64 = base64.StdEncoding.EncodeToString(c.Value)
			}
			row.Cells = append(row.Cells, pc)
		}
		out = append(out, row)
	}
	return out
}

// floorDiv is a / b rounded toward negative infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Write is one row write of a simulation: the event time and the row key.
type Write struct {
	EventMs int64
	RowKey  string
}

// ReadWrites parses input with spec and returns the row writes of table (the
// spec's first table when empty) in event-time order, one per record;
// records the pipeline would reject are counted and skipped.
func ReadWrites(spec *schemas.Spec, table string, in io.Reader) (writes []Write, rejected int, err error) {
	if table == "" {
		table = spec.Bigtable.Tables[0].Name
	}
	if spec.Table(table) == nil {
		return nil, 0, fmt.Errorf("spec %s has no table %q", spec.Name, table)
	}
	parser := codec.NewParser(spec)
	builder, err := hours.NewBuilder(spec)
	if err != nil {
		return nil, 0, err
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var recs []schemas.Record
	for sc.Scan() {
		recs, err = parser.Parse(recs[:0], sc.Bytes(), "")
		if err != nil {
			rejected++
			continue
		}
		for i := range recs {
			muts, errs := builder.Mutations(recs[i : i+1])
			if len(errs) > 0 {
				rejected++
				continue
			}
			for _, m := range muts {
				if m.Table == table {
					writes = append(writes, Write{EventMs: recs[i].EventMs, RowKey: m.RowKey})
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, rejected, fmt.Errorf("read input: %w", err)
	}
	if len(writes) == 0 {
		return nil, rejected, errors.New("no writes: the input has no valid records")
	}
	sort.SliceStable(writes, func(i, j int) bool { return writes[i].EventMs < writes[j].EventMs })
	return writes, rejected, nil
}
