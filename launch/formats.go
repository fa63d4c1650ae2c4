package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/sensorpipe/sensorpipe/dofns/fileio"
	"github.com/sensorpipe/sensorpipe/launch/parts"
	"github.com/sensorpipe/sensorpipe/pipelines"
)

// settleFormat reads a batch's file format off the files its glob matched
// when neither --format nor the glob's extension named one (all of one
// table format, or JSON lines), and checks that the columns of each CSV,
// Parquet or Avro file can fill the spec's fields: a usage error, one
// line naming the file and the column, refuses the run before the job.
func settleFormat(ctx context.Context, cfg pipelines.Config, p *plan) error {
	files, err := parts.List(ctx, p.batch.Input)
	if err != nil {
		return err
	}
	if p.detectFormat {
		seen := map[string]string{} // format -> an example file
		var order []string
		for _, f := range files {
			if fileio.IsDir(f.Path) {
				continue
			}
			format := fileio.FormatOf(f.Path)
			if format == "" {
				format = fileio.FormatJSON
			}
			if _, ok := seen[format]; !ok {
				seen[format] = f.Path
				order = append(order, format)
			}
		}
		if len(order) > 1 {
			var each []string
			for _, format := range order {
				each = append(each, fmt.Sprintf("%s is %s", seen[format], format))
			}
			return fmt.Errorf("--input %s matches files of %d formats (%s): give a glob of one format, or --format", p.batch.Input, len(order), strings.Join(each, ", "))
		}
		if len(order) == 1 && fileio.IsTableFormat(order[0]) {
			p.batch.Format, p.format = order[0], order[0]
		}
	}
	if !fileio.IsTableFormat(p.batch.Format) {
		return nil
	}
	for _, f := range files {
		if fileio.IsDir(f.Path) {
			continue
		}
		if err := fileio.CheckColumns(ctx, f.Path, p.batch.Format, cfg.Spec); err != nil {
			return fmt.Errorf("--input, read as %s: %w", p.batch.Format, err)
		}
	}
	return nil
}
