package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/launch/readside/keys"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// storedWrites samples the readings of a stored table: it splits the
// table at Bigtable's sample row keys (SampleRowKeys) and scans each
// range from its start until it has its share of maxReadings. It returns
// each reading's write as the table holds it, and, when proposed is set,
// as proposed's first table would (the reading's observed values parsed
// under proposed, as a rekey does), both in event-time order.
func storedWrites(ctx context.Context, st *storedTable, proposed *schemas.Spec, maxReadings int) (asIs, would []keys.Write, err error) {
	r, err := bigtableio.OpenReader(ctx, st.project, st.instance)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	var samples []string
	err = retry.Do(ctx, retry.Policy{AttemptTimeout: time.Minute, Deadline: 3 * time.Minute, MaxAttempts: 4}, func(ctx context.Context) error {
		samples, err = r.SampleRowKeys(ctx, st.rb.Table())
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: sample its row keys: %w", st, err)
	}
	var parser *codec.Parser
	var builder *hours.Builder
	if proposed != nil {
		parser = codec.NewParser(proposed)
		if builder, err = hours.NewBuilder(proposed); err != nil {
			return nil, nil, err
		}
	}
	ranges := bigtableio.KeyRange{}.SplitAt(samples)
	share := max(1, maxReadings/len(ranges))
	var parsed []schemas.Record
	for _, kr := range ranges {
		rctx, cancel := context.WithCancel(ctx)
		n := 0
		err := r.ReadRows(rctx, st.rb.Table(), []rowkey.RowRange{{Start: kr.Start, End: kr.End}}, st.rb.Families(), 0, 1<<62,
			func(row hours.ReadRow) {
				if n >= share {
					cancel() // this range's share is read
					return
				}
				recs, _ := st.rb.Records([]hours.ReadRow{row}, "", 0, 1<<62)
				for i := range recs {
					n++
					asIs = append(asIs, keys.Write{EventMs: recs[i].EventMs, RowKey: row.Key})
					if proposed == nil {
						continue
					}
					if parsed, err = parser.Parse(parsed[:0], []byte(recs[i].Raw), ""); err != nil {
						continue
					}
					for j := range parsed {
						muts, errs := builder.Mutations(parsed[j : j+1])
						if len(errs) > 0 {
							continue
						}
						for _, m := range muts {
							if m.Table == proposed.Bigtable.Tables[0].Name {
								would = append(would, keys.Write{EventMs: parsed[j].EventMs, RowKey: m.RowKey})
							}
						}
					}
				}
			})
		cancel()
		if err != nil && rctx.Err() == nil {
			return nil, nil, fmt.Errorf("%s: scan %v: %w", st, kr, err)
		}
	}
	byTime := func(w []keys.Write) {
		sort.SliceStable(w, func(i, j int) bool { return w[i].EventMs < w[j].EventMs })
	}
	byTime(asIs)
	byTime(would)
	return asIs, would, nil
}

// runStoredHotspots runs keys hotspots on a stored table (--table without
// --input): the table as it is, and under --proposed_spec.
func runStoredHotspots(kf keysFlags, stdout, stderr io.Writer) error {
	project, instance, err := cli.Bigtable(kf.btProject, kf.btInstance)
	if err != nil {
		return cli.Usage(err)
	}
	st, err := openStored("", kf.spec, kf.table, project, instance)
	if err != nil {
		return cli.Usage(fmt.Errorf("hotspots: --spec: %w", err))
	}
	var proposed *schemas.Spec
	if kf.proposedSpec != "" {
		if proposed, err = cli.LoadSpec(kf.proposedSpec); err != nil {
			return cli.Usage(fmt.Errorf("hotspots: --proposed_spec: %w", err))
		}
	}
	asIs, would, err := storedWrites(context.Background(), st, proposed, kf.maxReadings)
	if err != nil {
		return fmt.Errorf("hotspots: %w", err)
	}
	if len(asIs) == 0 {
		return fmt.Errorf("hotspots: %s holds no reading to draw", st)
	}
	if err := os.MkdirAll(kf.outDir, 0o755); err != nil {
		return err
	}
	draw := func(writes []keys.Write, title, name string) error {
		rep := keys.Simulate(writes, kf.tablets, kf.slices)
		rep.Title = title
		if err := rep.WriteText(stdout); err != nil {
			return err
		}
		pngPath, htmlPath := filepath.Join(kf.outDir, name+".png"), filepath.Join(kf.outDir, name+".html")
		if err := rep.WritePNGFile(pngPath); err != nil {
			return err
		}
		if err := rep.WriteHTMLFile(htmlPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "keys hotspots: %d readings of %s; wrote %s and %s\n", len(writes), title, pngPath, htmlPath)
		return nil
	}
	if err := draw(asIs, fmt.Sprintf("%s/%s/%s as it is (%s: %s)", project, instance, st.rb.Table(), st.spec.Name, st.spec.Table(st.rb.Table()).RowKey), kf.name); err != nil {
		return err
	}
	if proposed != nil {
		if len(would) == 0 {
			return fmt.Errorf("hotspots: no reading of %s builds a row of spec %s (do the specs share their fields?)", st.rb.Table(), proposed.Name)
		}
		return draw(would, fmt.Sprintf("%s/%s/%s under %s (%s)", project, instance, st.rb.Table(), proposed.Name, proposed.Bigtable.Tables[0].RowKey), kf.name+"-proposed")
	}
	return nil
}
