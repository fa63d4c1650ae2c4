package schemas

import (
	"embed"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas/internal/yamlcheck"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
	"gopkg.in/yaml.v3"
)

// BuiltinSpecs holds the built-in specs' YAML files, specs/NAME.yaml.
//
//go:embed specs/*.yaml
var BuiltinSpecs embed.FS

// defaultSpec is specs/DEFAULT: the name of the built-in spec the tools use
// when none is given (launch --spec, make run, make stream, publish).
//
//go:embed specs/DEFAULT
var defaultSpec string

// DefaultSpecName is the built-in spec the tools use when none is given.
func DefaultSpecName() string { return strings.TrimSpace(defaultSpec) }

// Field types a spec may declare.
const (
	TypeString    = "string"
	TypeFloat     = "float"
	TypeInt       = "int"
	TypeBool      = "bool"
	TypeTimestamp = "timestamp"
	TypeTags      = "tags" // a JSON object of string values, kept as sorted pairs
	TypeBytes     = "bytes"
)

// Pseudo-fields usable as column values; they are computed, not read.
const (
	ValueEventTime  = "$event_time"
	ValueReadingID  = "$reading_id"
	ValueIngestedAt = "$ingested_at"
)

// Spec is a declarative dataset: what the input looks like, how it is
// validated, and how it lands in Bigtable and BigQuery. It is loaded from YAML
// once at launch; Compile checks it and prepares the fast paths.
type Spec struct {
	// Name names the dataset, in errors, the ledger and the default topic.
	Name string `yaml:"name" jsonschema:"required,example=vitals"`
	// Description says what one input line is, for people.
	Description string `yaml:"description"`
	// KeyDelimiter separates the segments of a row key; a field value that
	// contains it is rejected (invalid_field) unless the table sets escape.
	KeyDelimiter string `yaml:"key_delimiter" jsonschema:"default=#"`
	// EventTime names the timestamp field that is the reading's event time:
	// its hour window, its cells' timestamps, its BigQuery partition.
	EventTime string `yaml:"event_time" jsonschema:"required,example=timestamp"`
	// EventTimeRange bounds the event times the dataset accepts; a reading
	// outside it is dead-lettered (out_of_range). Default: 1970-01-01T00:00:00Z
	// to 9999-12-31T23:59:59.999Z.
	EventTimeRange *TimeRangeSpec `yaml:"event_time_range,omitempty"`
	// UnknownFields is what a payload key the spec does not read does to
	// its reading: UnknownIgnore, UnknownCount (the default: counted per
	// key in the run's ledger) or UnknownReject (an unknown_field dead
	// letter).
	UnknownFields string `yaml:"unknown_fields,omitempty" jsonschema:"enum=ignore,enum=count,enum=reject,default=count"`
	// TimestampAttributeTolerance is how far (a Go duration) a message's
	// timestamp attribute (the launcher's --timestamp_attribute) may be from
	// the event time of a reading it carries before the reading is counted
	// as disagreeing (default DefaultTimestampAttributeTolerance). The
	// payload's event time is the reading's event time either way.
	TimestampAttributeTolerance string `yaml:"timestamp_attribute_tolerance,omitempty"`
	// MaxFuture is how far (a Go duration) a reading's event time may be
	// ahead of the wall clock when a stream reads it (default
	// DefaultMaxFuture). A reading further ahead, from a device whose clock
	// runs ahead, is dead-lettered as out_of_range: a stream's hours close
	// as time passes, and a reading stamped days ahead would otherwise sit
	// in an hour that cannot close before then. A batch does not check it.
	MaxFuture string `yaml:"max_future,omitempty" jsonschema:"default=1h"`
	// Cadence is how often each identity is expected to report, a Go
	// duration (e.g. 30s). It turns on coverage in the rollups and the
	// stream's silences; without it neither is computed.
	Cadence string `yaml:"cadence,omitempty" jsonschema:"example=30s"`
	// CadenceField names a field that carries each reading's own expected
	// interval (a Go duration string, or a number of seconds), in place of
	// Cadence.
	CadenceField string `yaml:"cadence_field,omitempty"`
	// SilentAfter is how long after its last reading a sensor counts as
	// silent, a Go duration (default 3 × the cadence).
	SilentAfter string `yaml:"silent_after,omitempty"`
	// Identity names the fields that identify a series (a sensor): readings
	// with the same identity and millisecond are one reading.
	Identity []string     `yaml:"identity" jsonschema:"required,minItems=1,example=sensor_id"`
	Explode  *ExplodeSpec `yaml:"explode,omitempty"`
	// Fields declares every input field the spec reads and how it is checked.
	Fields []FieldSpec `yaml:"fields" jsonschema:"required,minItems=1"`
	// Impute fills missing values of a field within its identity and hour.
	Impute []ImputeSpec `yaml:"impute"`
	// Bigtable declares the tables every reading is written to.
	Bigtable BigtableSpec `yaml:"bigtable" jsonschema:"required"`
	// BigQuery declares the analytics table; without it the BigQuery sink
	// cannot be turned on.
	BigQuery *BigQuerySpec `yaml:"bigquery,omitempty"`
	// Rollup declares hourly aggregates per identity, written to Bigtable
	// and BigQuery.
	Rollup *RollupSpec `yaml:"rollup,omitempty"`
	// Proto declares the protobuf message --format=proto reads (proto.go).
	Proto *ProtoSpec `yaml:"proto,omitempty"`
	// CSV says how --format=csv reads a file (tablefile.go).
	CSV *CSVSpec `yaml:"csv,omitempty"`
	// Queries are the questions the row keys must serve, run by name with
	// the query tool and checked by keys lint.
	Queries []QuerySpec `yaml:"queries"`

	// file is where the spec was loaded from, for error messages.
	file string
}

// TimeRangeSpec is an inclusive range of event times, each RFC 3339.
type TimeRangeSpec struct {
	Min string `yaml:"min,omitempty" jsonschema:"default=1970-01-01T00:00:00Z"`
	Max string `yaml:"max,omitempty" jsonschema:"default=9999-12-31T23:59:59.999Z"`
}

// The widest event-time range a spec may accept. Bigtable cell timestamps
// are microseconds since 1970 and cannot be negative, so a reading before
// 1970 cannot be stored at its event time; after 9999 a year no longer has
// four digits (key buckets, BigQuery TIMESTAMP).
var (
	EarliestEventTime = time.Unix(0, 0).UTC()
	LatestEventTime   = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
)

// EventTimeBounds is the spec's accepted event-time range in epoch
// milliseconds, inclusive (the default when it declares none). Call it on
// a validated spec.
func (s *Spec) EventTimeBounds() (minMs, maxMs int64) {
	minMs, maxMs = EarliestEventTime.UnixMilli(), LatestEventTime.UnixMilli()
	if r := s.EventTimeRange; r != nil {
		if r.Min != "" {
			minMs, _ = timestamps.ParseTimestamp(r.Min)
		}
		if r.Max != "" {
			maxMs, _ = timestamps.ParseTimestamp(r.Max)
		}
	}
	return minMs, maxMs
}

// ExplodeSpec turns one input object into one record per element of an array
// of [timestamp_ms, value] points (Heroic's write format).
type ExplodeSpec struct {
	// Path is the dotted path of the points array, e.g. "data.data".
	Path string `yaml:"path" jsonschema:"required"`
	// TimeField and ValueField name the fields each point fills.
	TimeField  string `yaml:"time_field" jsonschema:"required"`
	ValueField string `yaml:"value_field" jsonschema:"required"`
}

// FieldSpec is one input field.
type FieldSpec struct {
	// Name is the field's name in templates, values and errors.
	Name string `yaml:"name" jsonschema:"required,example=sensor_id"`
	Path string `yaml:"path,omitempty" jsonschema:"example=device.id"` // dotted JSON path; defaults to Name
	// Type is the field's type: timestamps are RFC 3339 or epoch
	// milliseconds; tags are a JSON object of strings.
	Type string `yaml:"type" jsonschema:"required,enum=string,enum=float,enum=int,enum=bool,enum=timestamp,enum=tags,enum=bytes"`
	// Required makes a reading without the field a missing_field dead letter.
	Required bool `yaml:"required" jsonschema:"default=false"`
	// Min and Max bound a number: a value outside is out_of_range.
	Min *float64 `yaml:"min,omitempty"`
	Max *float64 `yaml:"max,omitempty"`
	// Enum lists the values a string field may take (invalid_field otherwise).
	Enum []string `yaml:"enum,omitempty" jsonschema:"example=login"`
	// PII marks personal data: keys lint refuses it in a key or qualifier.
	PII bool `yaml:"pii,omitempty"`
	// Sequential marks a monotonically increasing id (for key lint).
	Sequential bool `yaml:"sequential,omitempty"`
	// Cardinality is "low" or "high", a hint for key lint.
	Cardinality string `yaml:"cardinality,omitempty" jsonschema:"enum=low,enum=high"`
	// MaxLength bounds a string or bytes value in bytes; a longer value is
	// rejected with invalid_field. Key lint uses it to bound the key length.
	MaxLength int `yaml:"max_length,omitempty"`
	// Unit is the unit of a timestamp field sent as a number: ms (the
	// default), s, us or ns. An RFC 3339 string needs none.
	Unit string `yaml:"unit,omitempty" jsonschema:"enum=ms,enum=s,enum=us,enum=ns,default=ms"`
	// Attribute names the Pub/Sub message attribute that fills the field
	// for each reading the message carries. The payload's own value wins
	// when it has one, unless AttributeWins.
	Attribute string `yaml:"attribute,omitempty" jsonschema:"example=site"`
	// AttributeWins makes the message attribute's value win over the
	// payload's own value of the field.
	AttributeWins bool `yaml:"attribute_wins,omitempty"`
	// Column names the column a CSV, Parquet or Avro file holds the field
	// in (a dotted path for a nested record); default: the field's name,
	// else the bigquery column that holds it.
	Column string `yaml:"column,omitempty" jsonschema:"example=device.id"`
	// Layout is a Go time layout that a timestamp field's text is
	// written in (e.g. 2006-01-02 15:04:05), for times without an offset;
	// they are read in Timezone. RFC 3339 text is read too.
	Layout string `yaml:"layout,omitempty" jsonschema:"example=2006-01-02 15:04:05"`
	// Timezone is the IANA zone (e.g. Europe/Berlin) of times read with
	// Layout, and of a Parquet or Avro timestamp not adjusted to UTC
	// (default UTC). A wall time that a daylight-saving change makes
	// ambiguous or skips is a bad_timestamp.
	Timezone string `yaml:"timezone,omitempty" jsonschema:"example=Europe/Berlin"`
}

// What a payload key the spec does not read does (Spec.UnknownFields).
const (
	UnknownIgnore = "ignore"
	UnknownCount  = "count"
	UnknownReject = "reject"
)

// DefaultTimestampAttributeTolerance is how far a message's timestamp
// attribute may be from its readings' event times before they are counted
// as disagreeing: a gateway stamps a message when it sends it, minutes at
// most after the readings it batched.
const DefaultTimestampAttributeTolerance = 10 * time.Minute

// AttributeTolerance is the spec's timestamp-attribute tolerance. Call it
// on a validated spec.
func (s *Spec) AttributeTolerance() time.Duration {
	if d, err := time.ParseDuration(s.TimestampAttributeTolerance); err == nil {
		return d
	}
	return DefaultTimestampAttributeTolerance
}

// UnknownFieldsMode is Spec.UnknownFields with its default.
func (s *Spec) UnknownFieldsMode() string {
	if s.UnknownFields == "" {
		return UnknownCount
	}
	return s.UnknownFields
}

// ImputeSpec fills a missing value from the nearest observed one in the same
// identity and hour, and sets Flag to whether it did.
type ImputeSpec struct {
	Field string `yaml:"field" jsonschema:"required,example=heart_rate"`
	Flag  string `yaml:"flag" jsonschema:"required,example=heart_rate_imputed"`
}

// BigtableSpec lists the tables one input fans out to.
type BigtableSpec struct {
	Tables []TableSpec `yaml:"tables" jsonschema:"required,minItems=1"`
	// Inventory names a table of one row per identity (its row key the
	// identity, as IdentityKey renders it) that holds when each sensor was
	// first and last seen and its last reading's hour, kept by every batch
	// and stream (see InventoryCells). The query tool's silent_sensors
	// reads it. --create_tables creates it.
	Inventory string `yaml:"inventory,omitempty" jsonschema:"example=sensor_inventory"`
}

// TableSpec is one Bigtable table: its row key template and families.
type TableSpec struct {
	Name     string       `yaml:"name" jsonschema:"required,example=patient_vitals"`
	RowKey   string       `yaml:"row_key" jsonschema:"required,example={sensor_id}#{timestamp|hour}"`
	Escape   bool         `yaml:"escape,omitempty"` // escape the delimiter in field values instead of rejecting them
	Families []FamilySpec `yaml:"families" jsonschema:"required,minItems=1"`
}

// FamilySpec is a column family with its garbage-collection policy.
type FamilySpec struct {
	Name    string       `yaml:"name" jsonschema:"required,example=vitals"`
	GC      *GCSpec      `yaml:"gc,omitempty"`
	Columns []ColumnSpec `yaml:"columns"`
}

// GCSpec is a family's GC policy. Both set means either rule collects (union).
type GCSpec struct {
	// MaxVersions keeps at most this many versions of a cell.
	MaxVersions int    `yaml:"max_versions,omitempty"`
	MaxAge      string `yaml:"max_age,omitempty" jsonschema:"example=720h"` // a Go duration, e.g. 720h
}

// ColumnSpec is one column: a qualifier template and the value it holds.
type ColumnSpec struct {
	Qualifier string `yaml:"qualifier" jsonschema:"required,example=heart_rate"`
	Value     string `yaml:"value" jsonschema:"required,example=heart_rate"`
	// Encoding is "text" (default: shortest decimal, true/false, raw
	// strings) or "int64be" (8-byte big-endian, Bigtable's counter format).
	Encoding string `yaml:"encoding,omitempty" jsonschema:"enum=text,enum=int64be,default=text"`
}

// BigQuerySpec is the analytics table: one flat row per reading.
type BigQuerySpec struct {
	Table            string         `yaml:"table" jsonschema:"required,example=readings"`
	TimePartitioning *PartitionSpec `yaml:"time_partitioning,omitempty"`
	// Clustering lists the table's clustering columns.
	Clustering []string `yaml:"clustering,omitempty" jsonschema:"example=sensor_id"`
	// StoresMayDiffer lets a reading whose event time BigQuery cannot take
	// (outside a partitioned table's writable window, BigQueryPastDays
	// back to BigQueryFutureDays ahead) land in Bigtable alone, dead-lettered
	// by BigQuery as write_failed. By default such a reading is rejected for
	// every sink (out_of_range or bad_timestamp, naming the window) when the
	// run writes BigQuery, so that the two stores hold the same readings.
	StoresMayDiffer bool `yaml:"stores_may_differ,omitempty"`
	// PrimaryKey names the columns that identify a row: the table's
	// PRIMARY KEY (…) NOT ENFORCED, which BigQuery's change data capture
	// needs. With --bigquery_write_method=upsert each row replaces the one
	// with its key. Its columns must be REQUIRED.
	PrimaryKey []string `yaml:"primary_key,omitempty"`
	// MaxStaleness is the table's max_staleness (a Go duration): how old
	// the CDC-applied data a query reads may be. It is set with a primary
	// key and defaults to DefaultMaxStaleness.
	MaxStaleness string         `yaml:"max_staleness,omitempty" jsonschema:"default=15m"`
	Columns      []BQColumnSpec `yaml:"columns" jsonschema:"required,minItems=1"`
}

// DefaultMaxStaleness is a keyed table's max_staleness when the spec sets
// none. BigQuery's CDC guide recommends the larger of the staleness a
// reader tolerates and twice the time a background apply job takes plus a
// buffer (it adds 7 minutes for the conversion of the streaming buffer):
// 15 minutes covers applies of a few minutes. Without max_staleness every
// query merges the pending changes at run time, reading the whole table
// whatever its partition filter.
const DefaultMaxStaleness = 15 * time.Minute

// MaxPrimaryKeyColumns is BigQuery's limit on a primary key's columns.
const MaxPrimaryKeyColumns = 16

// Staleness is the table's max_staleness: 0 without a primary key.
func (b *BigQuerySpec) Staleness() time.Duration {
	if len(b.PrimaryKey) == 0 {
		return 0
	}
	if d, err := time.ParseDuration(b.MaxStaleness); err == nil {
		return d
	}
	return DefaultMaxStaleness
}

// PartitionSpec is BigQuery time partitioning.
type PartitionSpec struct {
	Type  string `yaml:"type" jsonschema:"required,enum=DAY,enum=HOUR,enum=MONTH,enum=YEAR"` // DAY, HOUR, MONTH, YEAR
	Field string `yaml:"field" jsonschema:"required,example=event_timestamp"`
}

// BQColumnSpec is one BigQuery column and the value it holds.
type BQColumnSpec struct {
	Name  string `yaml:"name" jsonschema:"required,example=sensor_id"`
	Type  string `yaml:"type" jsonschema:"required,enum=STRING,enum=FLOAT64,enum=INT64,enum=BOOL,enum=TIMESTAMP,enum=BYTES"` // STRING, FLOAT64, INT64, BOOL, TIMESTAMP, BYTES
	Mode  string `yaml:"mode,omitempty" jsonschema:"enum=NULLABLE,enum=REQUIRED,default=NULLABLE"`                           // NULLABLE (default) or REQUIRED
	Value string `yaml:"value" jsonschema:"required,example=$event_time"`
}

// RollupSpec declares per-(identity, hour) aggregates.
type RollupSpec struct {
	Family string `yaml:"family" jsonschema:"required,example=hourly"` // Bigtable family in the same row
	Table  string `yaml:"bigquery_table"`                              // BigQuery table, e.g. readings_hourly
	// Stats, Last and Counted name the fields rolled up.
	Stats   []string `yaml:"stats"`                // fields with count/min/max/mean
	Last    []string `yaml:"last"`                 // fields whose last value is kept
	Counted []string `yaml:"count_true,omitempty"` // bool fields counted when true
}

// QuerySpec is a named query the keys must serve; the first with Main is
// the main one. The query tool runs it by name (see query.go).
type QuerySpec struct {
	Name string `yaml:"name" jsonschema:"required,example=sensor_last_hour"`
	// Description says what the query answers, for --list.
	Description string `yaml:"description"`
	// Main marks the query keys lint checks is a key prefix or range.
	Main bool `yaml:"main"`
	// Table pins the table the query reads; by default the query tool picks
	// the table whose key serves it best (ChooseTable).
	Table string `yaml:"table,omitempty"`
	// Where lists the query's parameters: fields fixed by a value or a
	// range lo..hi. "field=value" gives a default the caller may override.
	Where []string `yaml:"where"`
	Since string   `yaml:"since,omitempty" jsonschema:"example=24h"` // a time range back from now
	// NewestFirst reads the rows newest first (needs a reverse timestamp).
	NewestFirst bool `yaml:"newest_first,omitempty"`
	// Limit caps the rows the query reads; 0 means no cap.
	Limit int `yaml:"limit,omitempty"`
	// Latest reads the newest row of each key prefix (the key up to its
	// reverse timestamp) in the ranges, instead of every row.
	Latest bool `yaml:"latest,omitempty"`
	// Aggregate turns the rows into one number, or one per group.
	Aggregate *AggregateSpec `yaml:"aggregate,omitempty"`
}

// BuiltinSpecNames lists the specs compiled into the binary.
func BuiltinSpecNames() []string {
	entries, _ := BuiltinSpecs.ReadDir("specs")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// BuiltinSpec returns the built-in spec name (one of BuiltinSpecNames). Specs
// in files are read at the edge (cli.LoadSpec) and given to ParseSpec:
// this package does no I/O.
func BuiltinSpec(name string) (*Spec, error) {
	file := "specs/" + name + ".yaml"
	data, err := BuiltinSpecs.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: unknown spec %q: built-in specs are %s, or give a path to a YAML file", ErrSpec, name, strings.Join(BuiltinSpecNames(), ", "))
	}
	return ParseSpec(filepath.Base(file), data)
}

// IsSpecPath reports whether a --spec value names a file rather than a
// built-in spec.
func IsSpecPath(nameOrPath string) bool {
	return strings.ContainsAny(nameOrPath, "/\\") || strings.HasSuffix(nameOrPath, ".yaml") || strings.HasSuffix(nameOrPath, ".yml")
}

// ParseSpec decodes and validates a spec. Unknown keys are errors, so a typo
// is caught at launch rather than silently ignored.
func ParseSpec(file string, data []byte) (*Spec, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSpec, file, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%w: %s: the file is empty: a spec needs at least name, identity, event_time, fields and bigtable (see schemas/specs/ for examples)", ErrSpec, file)
	}
	if err := yamlcheck.Check(&doc, reflect.TypeOf(Spec{}), ""); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSpec, file, err)
	}
	var s Spec
	if err := doc.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSpec, file, err)
	}
	s.file = file
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// File is the file the spec was loaded from.
func (s *Spec) File() string { return s.file }

// SetFile names the file a spec decoded by other means (e.g. a DoFn's
// serialized copy) came from, for its errors.
func (s *Spec) SetFile(file string) { s.file = file }

// Errorf formats a spec error naming the file, the field and the fix.
func (s *Spec) Errorf(where, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s: %w", ErrSpec, s.file, where, fmt.Errorf(format, args...))
}

// ErrSpec marks an invalid spec.
var ErrSpec = errors.New("invalid spec")

// Validate checks a spec built or decoded by other means (e.g. a DoFn's
// serialized copy) and fills its defaults.
func (s *Spec) Validate() error {
	if s.file == "" {
		s.file = s.Name + ".yaml"
	}
	return s.validate()
}

func (s *Spec) validate() error {
	if s.Name == "" {
		return s.Errorf("name", "missing; give the dataset a name")
	}
	if s.KeyDelimiter == "" {
		s.KeyDelimiter = "#"
	}
	seen := map[string]bool{}
	for i, f := range s.Fields {
		where := fmt.Sprintf("fields[%d]", i)
		if f.Name == "" || strings.HasPrefix(f.Name, "$") {
			return s.Errorf(where+".name", "%q is not a field name; use letters, digits and _", f.Name)
		}
		if seen[f.Name] {
			return s.Errorf(where+".name", "%q is declared twice; remove one", f.Name)
		}
		seen[f.Name] = true
		switch f.Type {
		case TypeString, TypeFloat, TypeInt, TypeBool, TypeTimestamp, TypeTags, TypeBytes:
		default:
			return s.Errorf(where+".type", "unknown type %q; use one of string, float, int, bool, timestamp, tags, bytes", f.Type)
		}
		if f.Cardinality != "" && f.Cardinality != "low" && f.Cardinality != "high" {
			return s.Errorf(where+".cardinality", "%q; use low or high", f.Cardinality)
		}
		switch {
		case f.Unit != "" && f.Type != TypeTimestamp:
			return s.Errorf(where+".unit", "%q on a %s field; unit applies to timestamp fields sent as numbers", f.Unit, f.Type)
		case f.Unit != "" && timestamps.UnitNames[f.Unit] == "":
			return s.Errorf(where+".unit", "%q; use ms (the default), s, us or ns", f.Unit)
		case f.AttributeWins && f.Attribute == "":
			return s.Errorf(where+".attribute_wins", "set without attribute; name the message attribute (attribute: NAME) or drop attribute_wins")
		}
		if f.MaxLength < 0 || (f.MaxLength > 0 && f.Type != TypeString && f.Type != TypeBytes) {
			return s.Errorf(where+".max_length", "%d; max_length is a positive byte count for string and bytes fields", f.MaxLength)
		}
		if err := s.validateTextTime(where, &s.Fields[i]); err != nil {
			return err
		}
	}
	if err := s.validateCSV(); err != nil {
		return err
	}
	if ex := s.Explode; ex != nil {
		if ex.Path == "" || !seen[ex.TimeField] || !seen[ex.ValueField] {
			return s.Errorf("explode", "needs path, and time_field and value_field naming declared fields")
		}
	}
	switch s.UnknownFields {
	case "", UnknownIgnore, UnknownCount, UnknownReject:
	default:
		return s.Errorf("unknown_fields", "%q; use ignore, count (the default) or reject", s.UnknownFields)
	}
	if v := s.TimestampAttributeTolerance; v != "" {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return s.Errorf("timestamp_attribute_tolerance", "%q is not a duration such as 10m", v)
		}
	}
	if v := s.MaxFuture; v != "" {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return s.Errorf("max_future", "%q is not a positive duration such as 1h", v)
		}
	}
	if s.EventTime == "" {
		return s.Errorf("event_time", "missing; name the timestamp field that holds the event time")
	}
	if f := s.Field(s.EventTime); f == nil || f.Type != TypeTimestamp {
		return s.Errorf("event_time", "%q is not a declared timestamp field", s.EventTime)
	}
	if r := s.EventTimeRange; r != nil {
		bound := func(where, v string) (int64, error) {
			ms, err := timestamps.ParseTimestamp(v)
			switch {
			case err != nil:
				return 0, s.Errorf(where, "%v", err)
			case ms < EarliestEventTime.UnixMilli():
				return 0, s.Errorf(where, "%s is before 1970-01-01T00:00:00Z: Bigtable cell timestamps (the event time, in microseconds since 1970) cannot be negative", v)
			case ms > LatestEventTime.UnixMilli():
				return 0, s.Errorf(where, "%s is after 9999-12-31T23:59:59.999Z, the latest time with a four-digit year", v)
			}
			return ms, nil
		}
		lo, hi := EarliestEventTime.UnixMilli(), LatestEventTime.UnixMilli()
		var err error
		if r.Min != "" {
			if lo, err = bound("event_time_range.min", r.Min); err != nil {
				return err
			}
		}
		if r.Max != "" {
			if hi, err = bound("event_time_range.max", r.Max); err != nil {
				return err
			}
		}
		if lo > hi {
			return s.Errorf("event_time_range", "min %s is after max %s", r.Min, r.Max)
		}
	}
	if len(s.Identity) == 0 {
		return s.Errorf("identity", "missing; list the fields that identify a series (e.g. [sensor_id]): they spread the grouping over many keys")
	}
	for _, id := range s.Identity {
		if !seen[id] {
			return s.Errorf("identity", "%q is not a declared field", id)
		}
	}
	derived := map[string]bool{}
	for i, im := range s.Impute {
		where := fmt.Sprintf("impute[%d]", i)
		f := s.Field(im.Field)
		if f == nil || (f.Type != TypeFloat && f.Type != TypeInt) {
			return s.Errorf(where+".field", "%q is not a declared numeric field", im.Field)
		}
		if f.Required {
			return s.Errorf(where+".field", "%q is required, so it is never missing; drop the imputation or make it optional", im.Field)
		}
		if im.Flag == "" || seen[im.Flag] || derived[im.Flag] {
			return s.Errorf(where+".flag", "%q must be a new, unique name for the imputed flag", im.Flag)
		}
		derived[im.Flag] = true
	}
	known := func(v string) bool {
		return seen[v] || derived[v] || v == ValueEventTime || v == ValueReadingID || v == ValueIngestedAt
	}
	if len(s.Bigtable.Tables) == 0 {
		return s.Errorf("bigtable.tables", "missing; declare at least one table with a row_key")
	}
	for ti, t := range s.Bigtable.Tables {
		tw := fmt.Sprintf("bigtable.tables[%d]", ti)
		if t.Name == "" {
			return s.Errorf(tw+".name", "missing")
		}
		if _, err := CompileTemplate(t.RowKey, s); err != nil {
			return s.Errorf(tw+".row_key", "%w", err)
		}
		if len(t.Families) == 0 {
			return s.Errorf(tw+".families", "missing; declare at least one column family")
		}
		for fi, fam := range t.Families {
			fw := fmt.Sprintf("%s.families[%d]", tw, fi)
			if fam.Name == "" {
				return s.Errorf(fw+".name", "missing")
			}
			if fam.GC != nil && fam.GC.MaxAge != "" {
				if _, err := time.ParseDuration(fam.GC.MaxAge); err != nil {
					return s.Errorf(fw+".gc.max_age", "%q is not a Go duration such as 720h", fam.GC.MaxAge)
				}
			}
			for ci, c := range fam.Columns {
				cw := fmt.Sprintf("%s.columns[%d]", fw, ci)
				if _, err := CompileTemplate(c.Qualifier, s); err != nil || c.Qualifier == "" {
					return s.Errorf(cw+".qualifier", "bad qualifier %q: %v", c.Qualifier, err)
				}
				if !known(c.Value) {
					return s.Errorf(cw+".value", "%q is not a declared field, imputed flag or one of $event_time, $reading_id, $ingested_at", c.Value)
				}
				if c.Encoding != "" && c.Encoding != "text" && c.Encoding != "int64be" {
					return s.Errorf(cw+".encoding", "%q; use text or int64be", c.Encoding)
				}
			}
		}
	}
	if bq := s.BigQuery; bq != nil {
		cols := map[string]string{}
		for ci, c := range bq.Columns {
			cw := fmt.Sprintf("bigquery.columns[%d]", ci)
			if !known(c.Value) {
				return s.Errorf(cw+".value", "%q is not a declared field, imputed flag or one of $event_time, $reading_id, $ingested_at", c.Value)
			}
			switch c.Type {
			case "STRING", "FLOAT64", "INT64", "BOOL", "TIMESTAMP", "BYTES":
			default:
				return s.Errorf(cw+".type", "%q; use STRING, FLOAT64, INT64, BOOL, TIMESTAMP or BYTES", c.Type)
			}
			switch c.Mode {
			case "", "NULLABLE", "REQUIRED":
			default:
				return s.Errorf(cw+".mode", "%q; use NULLABLE or REQUIRED", c.Mode)
			}
			cols[c.Name] = c.Type
		}
		if p := bq.TimePartitioning; p != nil {
			if cols[p.Field] != "TIMESTAMP" {
				return s.Errorf("bigquery.time_partitioning.field", "%q is not a TIMESTAMP column of the table", p.Field)
			}
			switch p.Type {
			case "DAY", "HOUR", "MONTH", "YEAR":
			default:
				return s.Errorf("bigquery.time_partitioning.type", "%q; use DAY, HOUR, MONTH or YEAR", p.Type)
			}
		}
		for _, c := range bq.Clustering {
			if cols[c] == "" {
				return s.Errorf("bigquery.clustering", "%q is not a column of the table", c)
			}
		}
		if err := s.validateKey(bq); err != nil {
			return err
		}
	}
	if err := s.checkColumnTypes(); err != nil {
		return err
	}
	if err := s.validateCadence(); err != nil {
		return err
	}
	names := map[string]bool{}
	for qi := range s.Queries {
		q := &s.Queries[qi]
		if err := s.validateQuery(fmt.Sprintf("queries[%d]", qi), q); err != nil {
			return err
		}
		if names[q.Name] {
			return s.Errorf(fmt.Sprintf("queries[%d].name", qi), "%q is declared twice; give each query its own name", q.Name)
		}
		names[q.Name] = true
	}
	return s.validateProto()
}

// validateKey checks the BigQuery table's primary key and max_staleness,
// and fills the default max_staleness.
func (s *Spec) validateKey(bq *BigQuerySpec) error {
	if len(bq.PrimaryKey) == 0 {
		if bq.MaxStaleness != "" {
			return s.Errorf("bigquery.max_staleness", "%q is set but the table has no primary_key; max_staleness applies to CDC tables: add primary_key (e.g. [reading_id]) or remove max_staleness", bq.MaxStaleness)
		}
		return nil
	}
	if len(bq.PrimaryKey) > MaxPrimaryKeyColumns {
		return s.Errorf("bigquery.primary_key", "%d columns; BigQuery allows at most %d", len(bq.PrimaryKey), MaxPrimaryKeyColumns)
	}
	seen := map[string]bool{}
	for i, k := range bq.PrimaryKey {
		where := fmt.Sprintf("bigquery.primary_key[%d]", i)
		var col *BQColumnSpec
		for ci := range bq.Columns {
			if bq.Columns[ci].Name == k {
				col = &bq.Columns[ci]
			}
		}
		switch {
		case col == nil:
			return s.Errorf(where, "%q is not a column of the table; name one of bigquery.columns (e.g. reading_id)", k)
		case seen[k]:
			return s.Errorf(where, "%q is listed twice; list each key column once", k)
		case col.Mode != "REQUIRED":
			return s.Errorf(where, "column %q is NULLABLE; make it mode: REQUIRED (a NULL cannot identify a row)", k)
		}
		seen[k] = true
	}
	if bq.MaxStaleness == "" {
		bq.MaxStaleness = DefaultMaxStaleness.String()
		return nil
	}
	if d, err := time.ParseDuration(bq.MaxStaleness); err != nil || d < 0 {
		return s.Errorf("bigquery.max_staleness", "%q is not a duration such as 15m or 1h", bq.MaxStaleness)
	}
	return nil
}

// ParseSince parses a look-back duration: a Go duration (90m, 1h) or a
// whole number of days (1d, 7d).
func ParseSince(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(d, "%d", &n); err == nil && n > 0 && fmt.Sprint(n) == d {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration such as 1h, 90m or 7d", s)
	}
	return d, nil
}

// Field returns the field named name, or nil.
func (s *Spec) Field(name string) *FieldSpec {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return &s.Fields[i]
		}
	}
	return nil
}

// FieldIndex returns the index of a field or imputed flag in a Record's
// Values, or -1. Imputed flags follow the input fields in declaration order.
func (s *Spec) FieldIndex(name string) int {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return i
		}
	}
	for i, im := range s.Impute {
		if im.Flag == name {
			return len(s.Fields) + i
		}
	}
	return -1
}

// NumValues is the length of a Record's Values: fields then imputed flags.
func (s *Spec) NumValues() int { return len(s.Fields) + len(s.Impute) }

// MainQuery returns the query marked main, or the first, or nil.
func (s *Spec) MainQuery() *QuerySpec {
	for i := range s.Queries {
		if s.Queries[i].Main {
			return &s.Queries[i]
		}
	}
	if len(s.Queries) > 0 {
		return &s.Queries[0]
	}
	return nil
}

// Table returns the table named name, or nil.
func (s *Spec) Table(name string) *TableSpec {
	for i := range s.Bigtable.Tables {
		if s.Bigtable.Tables[i].Name == name {
			return &s.Bigtable.Tables[i]
		}
	}
	return nil
}

// ReadTableFirst makes table the spec's first Bigtable table, the one its
// read-back tries first: a table of the spec is moved there (a spec that
// writes two layouts reads either back), another name renames the first
// table (the spec's table under another name).
func (s *Spec) ReadTableFirst(table string) error {
	tables := s.Bigtable.Tables
	for i := range tables {
		if tables[i].Name == table {
			t := tables[i]
			copy(tables[1:i+1], tables[:i])
			tables[0] = t
			return nil
		}
	}
	return s.RenameTable(tables[0].Name, table)
}

// RenameTable renames a Bigtable table (e.g. from --bigtable_table).
func (s *Spec) RenameTable(from, to string) error {
	t := s.Table(from)
	if t == nil {
		return fmt.Errorf("spec %s has no table %q", s.Name, from)
	}
	t.Name = to
	for i := range s.Queries {
		if s.Queries[i].Table == from {
			s.Queries[i].Table = to
		}
	}
	return nil
}
