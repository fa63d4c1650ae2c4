package hours

import (
	"encoding/json"
	"fmt"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
)

// CompileOptions are the run's choices that the compiled rules depend on.
type CompileOptions struct {
	// Format is the payload format ("" means json): one of FormatNames.
	Format string `json:"format,omitempty"`
	// BigQueryAt, when the run writes BigQuery, is the time (epoch ms) its
	// start is reckoned at: a partitioned table takes rows only within a
	// window around it (BigQueryPastDays back, BigQueryFutureDays ahead),
	// and unless the spec's bigquery.stores_may_differ says otherwise the
	// accepted event times are narrowed to that window, so that a reading
	// BigQuery can never take is rejected for every sink. 0: no BigQuery.
	BigQueryAt int64 `json:"bigquery_at,omitempty"`
}

// BigQuery's writable window for a partitioned table: rows may be streamed
// to partitions from this many days before the current date to this many
// after (BigQuery's "outside the allowed bounds" error).
const (
	BigQueryPastDays   = 3650
	BigQueryFutureDays = 365
)

// EventTimeLimits are the event times the compiled spec accepts: the
// spec's event_time_range, narrowed to BigQuery's writable window when the
// run writes a partitioned BigQuery table and the spec does not let the
// stores differ. The window is kept a day inside BigQuery's, so that a
// stream that runs for a day still writes every reading it accepts.
func (c *Compiled) EventTimeLimits() codec.EventTimeLimits { return c.limits }

func eventTimeLimits(s *schemas.Spec, opts CompileOptions) codec.EventTimeLimits {
	lo, hi := s.EventTimeBounds()
	lim := codec.EventTimeLimits{MinMs: lo, MaxMs: hi, Why: "the spec's event_time_range sets them"}
	bq := s.BigQuery
	if opts.BigQueryAt == 0 || bq == nil || bq.TimePartitioning == nil || bq.StoresMayDiffer {
		return lim
	}
	const day = 24 * 60 * 60 * 1000
	bqLo := opts.BigQueryAt - (BigQueryPastDays-1)*day
	bqHi := opts.BigQueryAt + (BigQueryFutureDays-1)*day
	if bqLo <= lo && bqHi >= hi {
		return lim
	}
	lim.MinMs, lim.MaxMs = max(lo, bqLo), min(hi, bqHi)
	lim.Why = fmt.Sprintf("BigQuery's partitioned table %s takes rows only from %d days before to %d days after the current date (kept a day inside, from the run's start), so neither store is given such a reading; bigquery.stores_may_differ: true in the spec lets Bigtable take it alone",
		bq.Table, BigQueryPastDays, BigQueryFutureDays)
	if lim.MinMs > lim.MaxMs {
		lim.MinMs, lim.MaxMs = lo, hi // disjoint: every reading would fail; leave it to the sinks' checks
	}
	return lim
}

// Compiled is a dataset spec that passed every check, with the rules the
// pipeline runs built from it: the row builder, the rollups, the payload
// decoder and the BigQuery encoders. The launcher compiles once and passes
// it down; the pipelines and DoFns use it and check nothing again.
//
// Beam encodes a DoFn's fields as JSON, so a Compiled marshals as its spec
// and options, and a worker's copy is compiled again as it is decoded.
//
// It embeds the checked spec, which must not be changed.
type Compiled struct {
	*schemas.Spec
	opts    CompileOptions
	builder *Builder
	roller  *Roller
	decoder codec.Decoder
	limits  codec.EventTimeLimits
}

// Compile checks s with opts, once: its fields, templates, event-time
// range, tables, rollups, BigQuery columns and primary keys, and that the
// payload format can decode it. Errors name the spec's file, the YAML path
// and the fix (ErrSpec), or the format (ErrFormat).
func Compile(s *schemas.Spec, opts CompileOptions) (*Compiled, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: no dataset spec", schemas.ErrSpec)
	}
	if opts.Format == "" {
		opts.Format = "json"
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	c := &Compiled{Spec: s, opts: opts}
	var err error
	if c.builder, err = NewBuilder(s); err != nil {
		return nil, s.Errorf("bigtable.tables", "%w", err)
	}
	if c.roller, err = NewRoller(s); err != nil {
		return nil, err
	}
	for _, bq := range c.BigQueryTables() {
		if err := schemas.CheckBigQueryColumns(bq); err != nil {
			return nil, s.Errorf("bigquery", "table %s: %w", bq.Table, err)
		}
	}
	c.limits = eventTimeLimits(s, opts)
	if c.decoder, err = codec.NewDecoder(opts.Format, s, c.limits); err != nil {
		return nil, err
	}
	return c, nil
}

// Options are the options it was compiled with (Format filled in).
func (c *Compiled) Options() CompileOptions { return c.opts }

// Builder builds the Bigtable rows and BigQuery rows of records.
func (c *Compiled) Builder() *Builder { return c.builder }

// Roller builds the hourly rollups; nil when the spec declares none.
func (c *Compiled) Roller() *Roller { return c.roller }

// Decoder decodes payloads in the compiled format.
func (c *Compiled) Decoder() codec.Decoder { return c.decoder }

// BigQueryTables are the BigQuery tables the spec writes: its readings
// table, and the rollup table when it declares rollups. None when it has no
// BigQuery section.
func (c *Compiled) BigQueryTables() []*schemas.BigQuerySpec {
	if c.Spec.BigQuery == nil {
		return nil
	}
	out := []*schemas.BigQuerySpec{c.Spec.BigQuery}
	if c.roller != nil {
		out = append(out, c.roller.BigQuery())
	}
	return out
}

// compiledJSON is a Compiled as Beam serializes it.
type compiledJSON struct {
	Spec    *schemas.Spec  `json:"spec"`
	File    string         `json:"file"`
	Options CompileOptions `json:"options"`
}

// MarshalJSON encodes the spec and the options.
func (c *Compiled) MarshalJSON() ([]byte, error) {
	return json.Marshal(compiledJSON{Spec: c.Spec, File: c.File(), Options: c.opts})
}

// UnmarshalJSON decodes a spec and options and compiles them.
func (c *Compiled) UnmarshalJSON(b []byte) error {
	var j compiledJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("compiled spec: %w", err)
	}
	if j.Spec == nil {
		return fmt.Errorf("%w: no dataset spec", schemas.ErrSpec)
	}
	j.Spec.SetFile(j.File)
	cc, err := Compile(j.Spec, j.Options)
	if err != nil {
		return err
	}
	*c = *cc
	return nil
}

// MustCompile is Compile for specs known to be good (tests, built-ins); it
// panics on an error.
func MustCompile(s *schemas.Spec, opts CompileOptions) *Compiled {
	c, err := Compile(s, opts)
	if err != nil {
		panic(err)
	}
	return c
}
