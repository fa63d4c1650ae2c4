// Command keys is the row-key design toolkit: it previews the cells a
// dataset spec writes, lints a spec against Cloud Bigtable's schema-design
// rules (https://cloud.google.com/bigtable/docs/schema-design), and
// simulates where its writes land on tablets.
//
//	keys preview  [--spec NAME|FILE] --input FILE
//	keys lint     [--spec NAME|FILE]
//	keys hotspots [--spec NAME|FILE] --input FILE [--tablets N] [--slices N] [--table T] [--out DIR] [--name NAME]
//	keys hotspots [--spec NAME|FILE] --table T [--proposed_spec NAME|FILE] [--max_readings N] ...
//	keys compare  [--spec NAME|FILE] [--table T] [--against_spec NAME|FILE] --against_table T2 [--from_time T --to_time T]
//	keys compare  [--spec NAME|FILE] [--table T] [--against_spec NAME|FILE] --against_bigquery [PROJECT:]DATASET.TABLE ...
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/launch/readside/keys"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

const usage = `keys: row-key design toolkit for sensorpipe dataset specs.

Usage:
  keys preview  [--spec NAME|FILE] --input FILE
      Print one JSON line per input record: {"table","row_key","cells":[...]}
      for every table the record feeds, or {"reason","error"} for a record
      the pipeline would dead-letter.
  keys lint     [--spec NAME|FILE]
      Check the spec's row keys against Cloud Bigtable's schema-design rules. Prints one
      line per finding (severity, rule, why); exits 1 on any error.
  keys hotspots [--spec NAME|FILE] --input FILE [--tablets N] [--slices N]
                [--table T] [--out DIR] [--name NAME]
      Play the input's writes in event-time order over N tablets split at
      equal key counts, print each time slice's write shares, and write a
      Key Visualizer-style heatmap (NAME.png and NAME.html) to DIR
      (default .run/hotspots, which git ignores).
  keys hotspots [--spec NAME|FILE] --table T [--proposed_spec NAME|FILE]
                [--max_readings N] [--tablets N] [--slices N] [--out DIR] [--name NAME]
      The same for a stored table (in --bigtable_project/--bigtable_instance)
      written under --spec, from a sample of its readings (SampleRowKeys and
      a key scan): the table as it is, and with --proposed_spec as it would
      be under that spec (NAME-proposed.png and .html).
  keys compare  [--spec NAME|FILE] [--table T] [--against_spec NAME|FILE]
                --against_table T2 [--against_project P --against_instance I]
                [--from_time RFC3339 --to_time RFC3339] [--max_diffs N]
      Read two Bigtable tables back (each under its spec, in parallel by
      key range) and compare them sensor-hour by sensor-hour: each
      reading's identity, event time and observed values, and each hour's
      rollup. Prints one line of counts, then the first sensor-hours that
      differ, naming what differs; exits 1 on any difference, 0 on none.
      The first table is in --bigtable_project/--bigtable_instance.
  keys compare  [--spec NAME|FILE] [--table T] [--against_spec NAME|FILE]
                --against_bigquery [PROJECT:]DATASET.TABLE [--bigquery_project P] ...
      The same between a Bigtable table and the BigQuery readings table
      --against_spec's bigquery section wrote, with the spec's hourly
      rollup table in the same dataset (read with the Storage Read API;
      a reading in several rows counts once, its newest).

--spec is a built-in spec (%s; without --spec, %s) or a YAML file.

keys preview, lint and hotspots --input read spec and input files only:
they need no project, instance or emulator; compare reads Bigtable
(BIGTABLE_EMULATOR_HOST is honoured) and BigQuery
(BIGQUERY_STORAGE_EMULATOR_HOST). Exit codes: 0 done (lint: no error
finding; compare: equal), 1 a file or table could not be read or written
(lint: an error finding; compare: a difference), 2 bad flags or arguments.
`

// DefaultOut is where keys hotspots writes its pictures unless --out says
// otherwise: a folder git ignores (.run/, like the other tools' output), not
// the repository root.
const DefaultOut = ".run/hotspots"

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	var ex exitError
	if errors.As(err, &ex) {
		os.Exit(int(ex)) // already reported
	}
	os.Exit(cli.Report(os.Stderr, "keys", err))
}

// exitError is a non-zero exit whose message has already been printed.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// keysFlags are the flags of keys's commands; each command takes --spec
// and some of the others.
type keysFlags struct {
	spec, input, table, outDir, name string
	tablets, slices                  int

	// compare's.
	againstSpec, againstTable       string
	againstBigQuery, bqProject      string
	btProject, btInstance           string
	againstProject, againstInstance string
	fromTime, toTime                string
	maxDiffs, workers               int

	// hotspots on a stored table.
	proposedSpec string
	maxReadings  int
}

// newFlagSet is the flag set of keys's command cmd (preview, lint or
// hotspots), each flag bound to a field of kf.
func newFlagSet(cmd string, kf *keysFlags) (*flag.FlagSet, error) {
	fs := flag.NewFlagSet("keys "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a bad flag is one line; --help prints the flags
	fs.Usage = func() {}
	fs.StringVar(&kf.spec, "spec", schemas.DefaultSpecName(), cli.SpecUsage)
	switch cmd {
	case "preview":
		fs.StringVar(&kf.input, "input", "", "input file: one JSON object per line")
	case "lint":
	case "hotspots":
		fs.StringVar(&kf.input, "input", "", "input file: one JSON object per line")
		fs.IntVar(&kf.tablets, "tablets", 8, "number of tablets to split the key space into")
		fs.IntVar(&kf.slices, "slices", 24, "number of time slices across the input's event-time span")
		fs.StringVar(&kf.table, "table", "", "with --input: the spec's table to simulate (default: its first table); without --input: a stored Bigtable table written under --spec, drawn as it is from a sample of its readings (SampleRowKeys and a key scan)")
		fs.StringVar(&kf.outDir, "out", DefaultOut, "folder for the heatmap files, created if missing (the default is under .run/, which git ignores)")
		fs.StringVar(&kf.name, "name", "hotspots", "base name of the heatmap files: NAME.png and NAME.html (a stored table under --proposed_spec: NAME-proposed.png and .html)")
		fs.StringVar(&kf.proposedSpec, "proposed_spec", "", "with a stored --table: also draw its readings as they would land under this spec's first table")
		fs.IntVar(&kf.maxReadings, "max_readings", 1_000_000, "with a stored --table: the most readings sampled, shared among the table's key ranges")
		fs.StringVar(&kf.btProject, "bigtable_project", "", "with a stored --table: its Bigtable project (with BIGTABLE_EMULATOR_HOST set it defaults to local-project)")
		fs.StringVar(&kf.btInstance, "bigtable_instance", "", "with a stored --table: its Bigtable instance (with BIGTABLE_EMULATOR_HOST set it defaults to local-instance)")
	case "compare":
		fs.StringVar(&kf.table, "table", "", "the first table (default: the first table of --spec)")
		fs.StringVar(&kf.againstSpec, "against_spec", "", "the spec the second table was written under (default: --spec)")
		fs.StringVar(&kf.againstTable, "against_table", "", "the second table (this or --against_bigquery is required)")
		fs.StringVar(&kf.againstBigQuery, "against_bigquery", "", "compare the first table with BigQuery instead: the readings table [PROJECT:]DATASET.TABLE that --against_spec's bigquery section wrote (the project defaulting to --bigquery_project), and the spec's hourly rollup table in the same dataset, both read with the Storage Read API")
		fs.StringVar(&kf.bqProject, "bigquery_project", "", "with --against_bigquery: the BigQuery project of a table named without one (default: --bigtable_project; with BIGQUERY_EMULATOR_HOST set, local-project)")
		fs.StringVar(&kf.btProject, "bigtable_project", "", "Bigtable project of the first table (required; with BIGTABLE_EMULATOR_HOST set it defaults to local-project)")
		fs.StringVar(&kf.btInstance, "bigtable_instance", "", "Bigtable instance of the first table (required; with BIGTABLE_EMULATOR_HOST set it defaults to local-instance)")
		fs.StringVar(&kf.againstProject, "against_project", "", "Bigtable project of the second table (default: --bigtable_project)")
		fs.StringVar(&kf.againstInstance, "against_instance", "", "Bigtable instance of the second table (default: --bigtable_instance)")
		fs.StringVar(&kf.fromTime, "from_time", "", "compare only the readings at or after this RFC 3339 time, and the rollups of the hours that start then or later")
		fs.StringVar(&kf.toTime, "to_time", "", "compare only the readings before this RFC 3339 time, and the rollups of the hours that start before it")
		fs.IntVar(&kf.maxDiffs, "max_diffs", 10, "how many differing sensor-hours to describe")
		fs.IntVar(&kf.workers, "parallel", 8, "key ranges read at once, per table")
	default:
		return nil, cli.Usagef("unknown command %q: use preview, lint, hotspots or compare (keys --help)", cmd)
	}
	return fs, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, usage, strings.Join(schemas.BuiltinSpecNames(), ", "), schemas.DefaultSpecName())
		if len(args) == 0 {
			return exitError(2)
		}
		return nil
	}
	cmd, args := args[0], args[1:]
	var kf keysFlags
	fs, err := newFlagSet(cmd, &kf)
	if err != nil {
		return err
	}
	input, tablets, slices, table, outDir, name := &kf.input, &kf.tablets, &kf.slices, &kf.table, &kf.outDir, &kf.name
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return nil
		}
		return cli.Usagef("%s: %w (keys %s --help lists the flags)", cmd, err, cmd)
	}
	if fs.NArg() > 0 {
		return cli.Usagef("%s: unexpected arguments %q", cmd, fs.Args())
	}
	if cmd == "compare" {
		return runCompare(kf, stdout)
	}
	if cmd == "hotspots" && kf.input == "" && kf.table != "" {
		if kf.tablets < 1 || kf.slices < 1 || kf.maxReadings < 1 {
			return cli.Usagef("hotspots: --tablets, --slices and --max_readings must be at least 1")
		}
		return runStoredHotspots(kf, stdout, stderr)
	}
	if kf.proposedSpec != "" {
		return cli.Usagef("hotspots: --proposed_spec applies to a stored --table (without --input)")
	}
	spec, err := cli.LoadSpec(kf.spec)
	if err != nil {
		return cli.Usage(err)
	}
	if cmd != "lint" && *input == "" {
		return cli.Usagef("%s: --input is required (one JSON object per line)", cmd)
	}
	openInput := func() (*os.File, error) {
		f, err := os.Open(*input)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
		return f, nil
	}
	switch cmd {
	case "preview":
		f, err := openInput()
		if err != nil {
			return err
		}
		defer f.Close()
		rows, rejects, err := keys.Preview(spec, f, stdout)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "keys preview: %d rows, %d rejects\n", rows, rejects)
	case "lint":
		findings := rowkey.Lint(spec)
		errs := 0
		for _, f := range findings {
			fmt.Fprintln(stdout, f)
			if f.Severity == rowkey.SeverityError {
				errs++
			}
		}
		fmt.Fprintf(stderr, "keys lint: %s: %d findings, %d errors\n", spec.Name, len(findings), errs)
		if errs > 0 {
			return exitError(1)
		}
	case "hotspots":
		if *tablets < 1 || *slices < 1 {
			return cli.Usagef("hotspots: --tablets and --slices must be at least 1")
		}
		f, err := openInput()
		if err != nil {
			return err
		}
		defer f.Close()
		writes, rejected, err := keys.ReadWrites(spec, *table, f)
		if err != nil {
			return err
		}
		rep := keys.Simulate(writes, *tablets, *slices)
		rep.Title = fmt.Sprintf("%s: %s", spec.Name, keyTemplate(spec, *table))
		if err := rep.WriteText(stdout); err != nil {
			return err
		}
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			return err
		}
		pngPath := filepath.Join(*outDir, *name+".png")
		htmlPath := filepath.Join(*outDir, *name+".html")
		if err := rep.WritePNGFile(pngPath); err != nil {
			return err
		}
		if err := rep.WriteHTMLFile(htmlPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "keys hotspots: %d writes (%d rejected); wrote %s and %s\n", len(writes), rejected, pngPath, htmlPath)
	}
	return nil
}

// keyTemplate is the row-key template of the simulated table.
func keyTemplate(spec *schemas.Spec, table string) string {
	if table == "" {
		return spec.Bigtable.Tables[0].RowKey
	}
	if t := spec.Table(table); t != nil {
		return t.RowKey
	}
	return ""
}
