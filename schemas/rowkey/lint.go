package rowkey

import (
	"fmt"
	"github.com/sensorpipe/sensorpipe/schemas"
	"strconv"
	"strings"
)

// Severities of a lint Finding.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Lint rules. Each names one piece of Cloud Bigtable's row-key guidance
// ("Row keys to avoid" and the schema-design rules,
// https://cloud.google.com/bigtable/docs/schema-design; query-first design,
// https://cloud.google.com/bigtable/docs/schema-design-time-series).
const (
	RuleTimestampFirst   = "timestamp-first"            // key starts with a timestamp or other monotonically increasing value
	RuleSequentialFirst  = "sequential-id-first"        // key starts with a sequentially assigned id
	RuleLowCardinality   = "low-cardinality-first"      // key starts with a field of few values (domain, event type)
	RuleHashedKey        = "hashed-key"                 // the whole key is a hash: no sort order left to scan
	RuleRawBytes         = "raw-bytes"                  // a bytes field rendered raw in the key
	RulePIIInKey         = "pii-in-key"                 // a field marked pii in a row key or qualifier
	RuleKeyTooLong       = "key-too-long"               // the key can exceed 4 KiB
	RuleUnboundedWideRow = "unbounded-wide-row"         // time in qualifiers, no time bucket in the key
	RuleNeedlessReverse  = "needless-reverse-timestamp" // reverse timestamp, but no query reads newest first
	RuleTooManyFamilies  = "too-many-families"          // more than 100 column families
	RuleMainQueryScan    = "main-query-scan"            // the main query is not one prefix or range scan
	RuleSaltedScan       = "salted-scan"                // the main query needs one scan per salt bucket
	RuleNoMainQuery      = "no-main-query"              // no query declared to check the key against
)

// MaxFamilies is the most column families a table should have (Cloud
// Bigtable's quotas: 100 per table).
const MaxFamilies = 100

// Worst-case lengths lint assumes for key parts with no declared bound.
const (
	assumedStringBytes = 256  // a string or bytes field without max_length
	assumedTagsBytes   = 1024 // a tag set
)

// Finding is one lint result.
type Finding struct {
	Severity string
	Rule     string
	Table    string
	Message  string
}

// String is the finding as one line: severity, rule, table and why.
func (f Finding) String() string {
	if f.Table == "" {
		return fmt.Sprintf("%s %s: %s", f.Severity, f.Rule, f.Message)
	}
	return fmt.Sprintf("%s %s: table %s: %s", f.Severity, f.Rule, f.Table, f.Message)
}

// Lint checks every table of spec against the row-key rules and returns
// the findings, errors first in table order. A spec with no error finding
// passes.
func Lint(spec *schemas.Spec) []Finding {
	var out []Finding
	add := func(sev, rule, table, format string, args ...any) {
		out = append(out, Finding{Severity: sev, Rule: rule, Table: table, Message: fmt.Sprintf(format, args...)})
	}
	for ti := range spec.Bigtable.Tables {
		t := &spec.Bigtable.Tables[ti]
		key, err := schemas.CompileTemplate(t.RowKey, spec)
		if err != nil {
			add(SeverityError, "template", t.Name, "%v", err)
			continue
		}
		lintKeyStart(spec, t, key, add)
		lintKeyFields(spec, t, key, add)
		lintWideRows(spec, t, key, add)
		if n := len(t.Families); n > MaxFamilies {
			add(SeverityError, RuleTooManyFamilies, t.Name, "%d column families; keep to at most %d per table (more degrades performance): merge families that are read together", n, MaxFamilies)
		}
	}
	out = append(out, lintQueries(spec)...)
	// Errors first, stable otherwise.
	var errs, warns []Finding
	for _, f := range out {
		if f.Severity == SeverityError {
			errs = append(errs, f)
		} else {
			warns = append(warns, f)
		}
	}
	return append(errs, warns...)
}

type addFunc func(sev, rule, table, format string, args ...any)

// firstSegment is the key's first non-literal segment (a constant prefix
// shared by datasets does not spread writes), or nil.
func firstSegment(t *schemas.Template) *schemas.Segment {
	for i := range t.Segs {
		if t.Segs[i].Kind != schemas.SegLiteral {
			return &t.Segs[i]
		}
	}
	return nil
}

func hasOp(s *schemas.Segment, names ...string) bool {
	for _, o := range s.Ops {
		for _, n := range names {
			if o.Name == n {
				return true
			}
		}
	}
	return false
}

func lintKeyStart(spec *schemas.Spec, t *schemas.TableSpec, key *schemas.Template, add addFunc) {
	first := firstSegment(key)
	if first == nil {
		add(SeverityError, RuleLowCardinality, t.Name, "row key %q is a constant: every write goes to one row", t.RowKey)
		return
	}
	if first.Kind != schemas.SegField || hasOp(first, "hash") {
		return // a salt or a hash spreads writes
	}
	if first.Field >= len(spec.Fields) {
		return
	}
	f := &spec.Fields[first.Field]
	switch {
	case f.Type == schemas.TypeTimestamp:
		add(SeverityError, RuleTimestampFirst, t.Name, "row key %q starts with the time {%s}: writes at any moment all go to the tablet holding \"now\" (reversed or not); promote an identifying field (e.g. the sensor or user id) in front of it", t.RowKey, segSource(first))
	case f.Sequential:
		add(SeverityError, RuleSequentialFirst, t.Name, "row key %q starts with %s, a sequentially assigned id: the newest ids, the busiest, share one tablet; put a random id or a salt first, or reverse the id's digits", t.RowKey, f.Name)
	case f.Cardinality == "low" || f.Type == schemas.TypeBool || (len(f.Enum) > 0 && f.Cardinality != "high"):
		add(SeverityError, RuleLowCardinality, t.Name, "row key %q starts with %s, which has few values: each value's writes pile onto one tablet; put a high-cardinality field or a salt ({salt:N|field}) before it", t.RowKey, f.Name)
	}
}

func lintKeyFields(spec *schemas.Spec, t *schemas.TableSpec, key *schemas.Template, add addFunc) {
	allHashed, fields := true, 0
	for i := range key.Segs {
		s := &key.Segs[i]
		switch s.Kind {
		case schemas.SegLiteral:
			continue
		case schemas.SegSalt:
			continue
		case schemas.SegHash:
			fields++
			continue
		}
		fields++
		if !hasOp(s, "hash") {
			allHashed = false
		}
	}
	if fields > 0 && allHashed {
		add(SeverityError, RuleHashedKey, t.Name, "row key %q is a hash of its fields: the natural sort order is gone, so no prefix or range scan can serve a query; promote the fields themselves and, if writes need spreading, add a small salt ({salt:N|field}) in front", t.RowKey)
	}
	for i := range key.Segs {
		s := &key.Segs[i]
		if s.Kind != schemas.SegField || s.Field >= len(spec.Fields) {
			continue
		}
		f := &spec.Fields[s.Field]
		if f.Type == schemas.TypeBytes && !hasOp(s, "hex", "hash") {
			add(SeverityError, RuleRawBytes, t.Name, "row key %q renders %s as raw bytes: keys should be human-readable strings; use {%s|hex}", t.RowKey, f.Name, f.Name)
		}
		if f.PII && !hasOp(s, "hash") {
			add(SeverityError, RulePIIInKey, t.Name, "row key %q holds %s, marked pii: row keys are metadata that tools and logs expose; use a pseudonymous id instead", t.RowKey, f.Name)
		}
	}
	for _, fam := range t.Families {
		for _, c := range fam.Columns {
			q, err := schemas.CompileTemplate(c.Qualifier, spec)
			if err != nil {
				continue
			}
			for i := range q.Segs {
				s := &q.Segs[i]
				if s.Kind == schemas.SegField && s.Field < len(spec.Fields) && spec.Fields[s.Field].PII && !hasOp(s, "hash") {
					add(SeverityError, RulePIIInKey, t.Name, "qualifier %q in family %s holds %s, marked pii: qualifiers are metadata too; move it into a cell value", c.Qualifier, fam.Name, s.Name)
				}
			}
		}
	}
	if n, why := maxKeyBytes(spec, t, key); n > schemas.MaxRowKeyBytes {
		add(SeverityError, RuleKeyTooLong, t.Name, "row key %q can be %d bytes (%s); Bigtable allows %d: bound the fields with max_length or drop some", t.RowKey, n, why, schemas.MaxRowKeyBytes)
	}
}

// maxKeyBytes is the worst-case rendered length of key, with the part that
// dominates it.
func maxKeyBytes(spec *schemas.Spec, t *schemas.TableSpec, key *schemas.Template) (int, string) {
	total, worst, worstN := 0, "", 0
	for i := range key.Segs {
		s := &key.Segs[i]
		n := 0
		switch s.Kind {
		case schemas.SegLiteral:
			n = len(s.Literal)
		case schemas.SegSalt:
			n = s.Width
		case schemas.SegHash:
			n = 16
		default:
			n = segMaxBytes(spec, s)
			if t.Escape {
				n *= 2
			}
		}
		total += n
		if s.Kind != schemas.SegLiteral && n > worstN {
			worst, worstN = fmt.Sprintf("{%s} up to %d", segSource(s), n), n
		}
	}
	return total, worst
}

func segMaxBytes(spec *schemas.Spec, s *schemas.Segment) int {
	n := 0
	var f *schemas.FieldSpec
	if s.Field < len(spec.Fields) {
		f = &spec.Fields[s.Field]
	}
	switch s.In {
	case schemas.KindString, schemas.KindBytes:
		n = assumedStringBytes
		if f != nil && f.MaxLength > 0 {
			n = f.MaxLength
		}
	case schemas.KindTags:
		n = assumedTagsBytes
	case schemas.KindBool:
		n = 5
	case schemas.KindFloat:
		n = 32
	default:
		n = 20
	}
	for _, o := range s.Ops {
		switch o.Name {
		case "year":
			n = 4
		case "month":
			n = 7
		case "day":
			n = 10
		case "hour":
			n = 13
		case "minute":
			n = 16
		case "ms", "base", "offset":
			n = 20
		case "reverse":
			n = schemas.ReverseWidth
		case "pad":
			n, _ = strconv.Atoi(o.Arg)
		case "hash":
			n = 16
		case "hex":
			n *= 2
		}
	}
	return n
}

// timeSegment reports whether s renders a timestamp field.
func timeSegment(spec *schemas.Spec, s *schemas.Segment) bool {
	return s.Kind == schemas.SegField && s.In == schemas.KindTime && !hasOp(s, "hash")
}

func lintWideRows(spec *schemas.Spec, t *schemas.TableSpec, key *schemas.Template, add addFunc) {
	keyHasTime := false
	reverse := false
	for i := range key.Segs {
		if timeSegment(spec, &key.Segs[i]) {
			keyHasTime = true
		}
		if hasOp(&key.Segs[i], "reverse") {
			reverse = true
		}
	}
	if !keyHasTime {
		for _, fam := range t.Families {
			for _, c := range fam.Columns {
				q, err := schemas.CompileTemplate(c.Qualifier, spec)
				if err != nil {
					continue
				}
				for i := range q.Segs {
					if timeSegment(spec, &q.Segs[i]) {
						add(SeverityError, RuleUnboundedWideRow, t.Name, "qualifier %q in family %s holds a time but row key %q has no time bucket: each row grows without bound; add a bucket such as {%s|day} to the key", c.Qualifier, fam.Name, t.RowKey, spec.EventTime)
						goto done
					}
				}
			}
		}
	done:
	}
	if reverse {
		newest := false
		for _, q := range spec.Queries {
			if QueryTable(spec, &q).Name == t.Name && (q.NewestFirst || q.Latest) {
				newest = true
			}
		}
		if !newest {
			add(SeverityWarning, RuleNeedlessReverse, t.Name, "row key %q uses a reverse timestamp but no query on this table reads newest first (newest_first: true); use reverse timestamps only when necessary, a plain time sorts and reads forward", t.RowKey)
		}
	}
}

// placeholder is a value of a field's type that renders through any op.
func placeholder(f *schemas.FieldSpec) string {
	switch f.Type {
	case schemas.TypeInt:
		return "1"
	case schemas.TypeFloat:
		return "1.5"
	case schemas.TypeBool:
		return "true"
	case schemas.TypeTimestamp:
		return "1772359200000"
	case schemas.TypeTags:
		return "k=v"
	}
	if len(f.Enum) > 0 {
		return f.Enum[0]
	}
	return "x"
}

// lintQueries checks that the main query is one prefix or range scan: its
// where fields fix a key prefix, followed (when it has a time range) by the
// event-time component.
func lintQueries(spec *schemas.Spec) []Finding {
	q := spec.MainQuery()
	if q == nil {
		return []Finding{{Severity: SeverityWarning, Rule: RuleNoMainQuery, Message: "the spec declares no queries: declare the main query (queries: - main: true, where: [...], since: ...) so the key can be checked against it"}}
	}
	table := QueryTable(spec, q)
	kq := KeyQueryFor(spec, q)
	kq.Table = table.Name
	var out []Finding
	bad := func(format string, args ...any) {
		out = append(out, Finding{Severity: SeverityError, Rule: RuleMainQueryScan, Table: table.Name, Message: fmt.Sprintf("main query %s (%s): ", q.Name, q.Description) + fmt.Sprintf(format, args...)})
	}
	plan, err := PlanScan(spec, kq)
	if err != nil {
		bad("cannot plan: %v", err)
		return out
	}
	switch {
	case plan.Kind == ScanFull:
		bad("row key %q has none of its where fields [%s] first: it is a full table scan (%s); a key such as %q would serve it", table.RowKey, strings.Join(q.Where, ", "), plan.Stop, SuggestKey(spec, kq, NeedOf(q)))
	case len(plan.Unused) > 0:
		bad("where fields [%s] are not part of the key prefix of %q (%s): the scan cannot narrow on them; order the key as the where fields, then the time", strings.Join(plan.Unused, ", "), table.RowKey, plan.Stop)
	case q.Since != "" && plan.Kind != ScanRange:
		bad("since %s, but no time component follows the where fields in %q (%s): the scan reads the whole history; put a time bucket, epoch or reverse timestamp right after them", q.Since, table.RowKey, plan.Stop)
	}
	fanned := 1 // ranges from enum fan-out, one per value: cheap and exact
	for _, f := range plan.FanOut {
		fanned *= len(spec.Field(f).Enum)
	}
	if len(out) == 0 && len(plan.Ranges)/fanned > 1 {
		out = append(out, Finding{Severity: SeverityWarning, Rule: RuleSaltedScan, Table: table.Name, Message: fmt.Sprintf("main query %s needs %d scans, one per salt bucket, because the salt's fields are not all in where; fine for writes, costly for reads", q.Name, len(plan.Ranges))})
	}
	return out
}
