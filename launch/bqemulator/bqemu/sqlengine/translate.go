package sqlengine

import (
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// The translation layer: GoogleSQL in, DuckDB SQL out. It does not parse
// SQL; it walks the tokens and rewrites what the two dialects spell
// differently, and refuses, with BigQuery's invalidQuery error, what it
// does not know to be the same in both. See the package comment for the
// supported subset.

// tableRef is a resolved table reference.
type tableRef struct{ project, dataset, table string }

// translator holds one query's translation state.
type translator struct {
	q              string // the query, for error positions
	project        string
	defaultDataset string
	legacy         bool
	now            time.Time
	// lookup checks that a table exists (an error with BigQuery's
	// notFound shape otherwise).
	lookup func(tableRef) error
	ctes   map[string]bool
	refs   []tableRef
}

// frame is the state of one parenthesis level.
type frame struct {
	inFrom      bool // between FROM and the clause after it
	expectTable bool // the next item is a table expression
}

// reserved holds GoogleSQL's reserved keywords: never an alias, never a
// function name (CAST, EXTRACT and IF, which are, are handled first).
var reserved = setOf(`ALL AND ANY ARRAY AS ASC ASSERT_ROWS_MODIFIED AT BETWEEN BY CASE CAST COLLATE
	CONTAINS CREATE CROSS CUBE CURRENT DEFAULT DEFINE DESC DISTINCT ELSE END ENUM ESCAPE EXCEPT EXCLUDE
	EXISTS EXTRACT FALSE FETCH FOLLOWING FOR FROM FULL GROUP GROUPING GROUPS HASH HAVING IF IGNORE IN
	INNER INTERSECT INTERVAL INTO IS JOIN LATERAL LEFT LIKE LIMIT LOOKUP MERGE NATURAL NEW NO NOT NULL
	NULLS OF ON OR ORDER OUTER OVER PARTITION PRECEDING PROTO QUALIFY RANGE RECURSIVE RESPECT RIGHT
	ROLLUP ROWS SELECT SET SOME STRUCT TABLESAMPLE THEN TO TREAT TRUE UNBOUNDED UNION UNNEST USING
	WHEN WHERE WINDOW WITH WITHIN`)

// endsFrom are the keywords that end a FROM clause.
var endsFrom = setOf(`WHERE GROUP HAVING QUALIFY WINDOW ORDER LIMIT UNION INTERSECT EXCEPT SELECT`)

// passThrough are the functions whose DuckDB namesake takes the same
// arguments and gives the same result for the types the emulator stores.
var passThrough = setOf(`COUNT SUM AVG MIN MAX ANY_VALUE APPROX_COUNT_DISTINCT STDDEV STDDEV_SAMP
	STDDEV_POP VARIANCE VAR_SAMP VAR_POP STRING_AGG ARRAY_AGG
	ROW_NUMBER RANK DENSE_RANK PERCENT_RANK CUME_DIST NTILE LAG LEAD FIRST_VALUE LAST_VALUE NTH_VALUE
	COALESCE NULLIF GREATEST LEAST IFNULL
	ABS ROUND FLOOR CEIL CEILING SQRT POW POWER MOD SIGN LN EXP
	LOWER UPPER LENGTH CONCAT SUBSTR STARTS_WITH ENDS_WITH TRIM LTRIM RTRIM REPLACE REVERSE`)

// renamed are functions DuckDB spells differently.
var renamed = map[string]string{
	"COUNTIF":     "count_if",
	"LOGICAL_AND": "bool_and",
	"LOGICAL_OR":  "bool_or",
	"IF":          "if",
	"UNIX_MILLIS": "epoch_ms",
	"UNIX_MICROS": "epoch_us",
	// Macros the engine defines (see macros in engine.go).
	"TIMESTAMP_ADD": "bq_timestamp_add",
	"TIMESTAMP_SUB": "bq_timestamp_sub",
	"DATETIME_ADD":  "bq_timestamp_add",
	"DATETIME_SUB":  "bq_timestamp_sub",
	"DATE_ADD":      "bq_date_add",
	"DATE_SUB":      "bq_date_sub",
	"SAFE_DIVIDE":   "bq_safe_divide",
}

// dateParts are the parts TIMESTAMP_DIFF, TIMESTAMP_TRUNC and EXTRACT take
// with the same meaning in both dialects. (BigQuery's WEEK starts on
// Sunday, DuckDB's on Monday; MILLISECOND and MICROSECOND differ in
// EXTRACT: they are left out.)
var dateParts = setOf(`MICROSECOND MILLISECOND SECOND MINUTE HOUR DAY MONTH QUARTER YEAR`)

// castTypes maps GoogleSQL type names to DuckDB's.
var castTypes = map[string]string{
	"INT64": "BIGINT", "INTEGER": "BIGINT", "BIGINT": "BIGINT", "SMALLINT": "BIGINT", "INT": "BIGINT", "TINYINT": "BIGINT", "BYTEINT": "BIGINT",
	"FLOAT64": "DOUBLE", "FLOAT": "DOUBLE",
	"NUMERIC": "DECIMAL(38,9)", "DECIMAL": "DECIMAL(38,9)", "BIGNUMERIC": "DOUBLE", "BIGDECIMAL": "DOUBLE",
	"BOOL": "BOOLEAN", "BOOLEAN": "BOOLEAN",
	"STRING": "VARCHAR", "BYTES": "BLOB",
	"TIMESTAMP": "TIMESTAMPTZ", "DATETIME": "TIMESTAMP", "DATE": "DATE", "TIME": "TIME",
}

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// translate turns a GoogleSQL query into DuckDB SQL over bq_table(…) scans.
func (tr *translator) translate() (string, error) {
	all, err := lex(tr.q)
	if err != nil {
		return "", err
	}
	var toks []token
	for _, t := range all {
		if t.kind != tkSpace {
			toks = append(toks, t)
		}
	}
	for len(toks) > 0 && toks[len(toks)-1].is(";") {
		toks = toks[:len(toks)-1]
	}
	if len(toks) == 0 {
		return "", invalidQuery("Syntax error: Unexpected end of script at [1:1]")
	}
	first := toks[0]
	if !(first.is("SELECT") || first.is("WITH") || first.is("(")) {
		word := first.text
		if first.kind == tkIdent {
			word = strings.ToUpper(word)
		}
		return "", tr.unsupported(first, "statement %s: the emulator runs queries (SELECT and WITH … SELECT) only", word)
	}
	tr.ctes = map[string]bool{}
	for i := 1; i+2 < len(toks); i++ {
		if (toks[i-1].is("WITH") || toks[i-1].is("RECURSIVE") || toks[i-1].is(",")) &&
			(toks[i].kind == tkIdent || toks[i].kind == tkQuoted) && toks[i+1].is("AS") && toks[i+2].is("(") {
			tr.ctes[strings.ToLower(toks[i].text)] = true
		}
	}
	return tr.tokens(toks)
}

// tokens translates a run of tokens (a whole query, or a function's
// argument).
func (tr *translator) tokens(toks []token) (string, error) {
	var out strings.Builder
	glue := false // the last token was "."
	emit := func(s string) {
		if out.Len() > 0 && !glue && s != "." && s != "," {
			out.WriteByte(' ')
		}
		out.WriteString(s)
		glue = s == "."
	}
	stack := []frame{{}}
	cur := func() *frame { return &stack[len(stack)-1] }
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		next := func(k int) token {
			if i+k < len(toks) {
				return toks[i+k]
			}
			return token{kind: tkSpace, pos: len(tr.q)}
		}
		switch t.kind {
		case tkParam:
			return "", tr.unsupported(t, "query parameters (%s)", t.text)
		case tkString:
			emit(duckString(t.text))
			continue
		case tkBytes:
			emit(duckBytes(t.text))
			continue
		case tkNumber:
			emit(duckNumber(t.text))
			continue
		case tkOp:
			switch t.text {
			case "(":
				if cur().expectTable {
					cur().expectTable = false // a subquery or a parenthesized join
				}
				stack = append(stack, frame{})
				emit("(")
			case ")":
				if len(stack) > 1 {
					stack = stack[:len(stack)-1]
				}
				emit(")")
			case ",":
				if cur().inFrom {
					cur().expectTable = true
				}
				emit(",")
			case ";":
				return "", tr.unsupported(t, "multi-statement queries (scripts)")
			case "::", "[", "]", "{", "}", "=>":
				l, c := lineCol(tr.q, t.pos)
				if t.text == "[" && tr.legacy && cur().expectTable {
					n, err := tr.legacyTable(toks, i, &out)
					if err != nil {
						return "", err
					}
					i = n
					cur().expectTable = false
					continue
				}
				if t.text == "[" {
					return "", tr.unsupported(t, "array subscripts and literals ([…])")
				}
				return "", invalidQuery("Syntax error: Unexpected %q at [%d:%d]", t.text, l, c)
			case "*":
				emit("*")
				// SELECT * EXCEPT (…) is DuckDB's * EXCLUDE (…).
				if next(1).is("EXCEPT") && next(2).is("(") {
					emit("EXCLUDE")
					i++
				}
			default:
				emit(t.text)
			}
			continue
		}

		// An identifier, possibly the first part of a dotted path.
		parts := []token{t}
		j := i + 1
		for j+1 < len(toks) && toks[j].is(".") && (toks[j+1].kind == tkIdent || toks[j+1].kind == tkQuoted) {
			parts = append(parts, toks[j+1])
			j += 2
		}
		if cur().expectTable {
			if len(parts) == 1 && t.kind == tkIdent && (t.is("UNNEST") || next(1).is("(")) {
				return "", tr.unsupported(t, "table-valued functions and UNNEST in FROM")
			}
			ref, err := tr.resolve(parts)
			if err != nil {
				return "", err
			}
			if ref == nil { // a WITH name
				emit(duckIdent(parts[0].text))
			} else {
				emit(fmt.Sprintf("bq_table(%s, %s, %s)", duckString(ref.project), duckString(ref.dataset), duckString(ref.table)))
			}
			i = j - 1
			cur().expectTable = false
			after := next(1)
			switch {
			case after.is("FOR"):
				return "", tr.unsupported(after, "FOR SYSTEM_TIME AS OF (time travel)")
			case after.is("TABLESAMPLE"):
				return "", tr.unsupported(after, "TABLESAMPLE")
			case ref != nil && !after.is("AS") && !(after.kind == tkIdent && !reserved[strings.ToUpper(after.text)]) && after.kind != tkQuoted:
				// BigQuery's implicit alias: the table's name.
				emit("AS " + duckIdent(ref.table))
			}
			continue
		}
		if len(parts) > 1 {
			if next(j - i).is("(") {
				return "", tr.unsupported(t, "function %s", pathText(parts))
			}
			var segs []string
			for _, p := range parts {
				segs = append(segs, identText(p))
			}
			emit(strings.Join(segs, "."))
			i = j - 1
			continue
		}
		if t.kind == tkQuoted {
			if strings.Contains(t.text, ".") {
				l, c := lineCol(tr.q, t.pos)
				return "", invalidQuery("Unrecognized name: %s at [%d:%d]", t.text, l, c)
			}
			emit(duckIdent(t.text))
			continue
		}
		word := strings.ToUpper(t.text)
		switch {
		case word == "FROM":
			cur().inFrom, cur().expectTable = true, true
			emit("FROM")
			continue
		case word == "JOIN":
			cur().expectTable = true
			emit("JOIN")
			continue
		case endsFrom[word]:
			cur().inFrom, cur().expectTable = false, false
			emit(word)
			continue
		case word == "CURRENT_TIMESTAMP" || word == "CURRENT_DATE" || word == "CURRENT_DATETIME" || word == "CURRENT_TIME":
			emit(tr.currentLiteral(word))
			if next(1).is("(") && next(2).is(")") {
				i += 2
			}
			continue
		case (word == "TIMESTAMP" || word == "DATE" || word == "DATETIME" || word == "TIME" || word == "NUMERIC" || word == "BIGNUMERIC") && next(1).kind == tkString:
			emit(fmt.Sprintf("CAST(%s AS %s)", duckString(next(1).text), castTypes[word]))
			i++
			continue
		case word == "JSON" && next(1).kind == tkString:
			return "", tr.unsupported(t, "JSON literals")
		}
		if next(1).is("(") && (!reserved[word] || word == "CAST" || word == "EXTRACT" || word == "IF") {
			closeAt, err := matchParen(toks, i+1)
			if err != nil {
				return "", tr.syntax(toks[i+1], "%v", err)
			}
			s, err := tr.call(t, toks[i+2:closeAt])
			if err != nil {
				return "", err
			}
			emit(s)
			i = closeAt
			continue
		}
		if (word == "ARRAY" || word == "STRUCT") && (next(1).is("(") || next(1).is("<") || next(1).is("[")) {
			return "", tr.unsupported(t, "%s values", word)
		}
		emit(t.text)
	}
	return out.String(), nil
}

// call translates a function call: f is its name, args the tokens between
// its parentheses.
func (tr *translator) call(f token, args []token) (string, error) {
	name := strings.ToUpper(f.text)
	split := splitArgs(args)
	if len(args) == 0 {
		split = nil
	}
	// exprs checks the call has n arguments and translates those at idx.
	exprs := func(n int, idx ...int) ([]string, error) {
		if len(split) != n {
			l, c := lineCol(tr.q, f.pos)
			return nil, invalidQuery("No matching signature for function %s for %d argument(s) at [%d:%d]", name, len(split), l, c)
		}
		out := make([]string, len(idx))
		for i, k := range idx {
			s, err := tr.tokens(split[k])
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	// part is argument k as a date part, e.g. HOUR: 'hour'.
	part := func(k int) (string, error) {
		if len(split[k]) != 1 || split[k][0].kind != tkIdent || !dateParts[strings.ToUpper(split[k][0].text)] {
			return "", tr.unsupported(firstOr(split[k], f), "date part %s in %s (supported: MICROSECOND, MILLISECOND, SECOND, MINUTE, HOUR, DAY, MONTH, QUARTER, YEAR)", tokText(split[k]), name)
		}
		return duckString(strings.ToLower(split[k][0].text)), nil
	}
	switch {
	case passThrough[name] || renamed[name] != "":
		inner, err := tr.tokens(args)
		if err != nil {
			return "", err
		}
		fn := renamed[name]
		if fn == "" {
			fn = strings.ToLower(name)
		}
		return fn + "(" + inner + ")", nil
	case name == "CAST" || name == "SAFE_CAST":
		return tr.cast(f, name, args)
	case name == "EXTRACT":
		return tr.extract(f, args)
	case name == "TIMESTAMP_DIFF" || name == "DATETIME_DIFF" || name == "DATE_DIFF":
		e, err := exprs(3, 0, 1)
		if err != nil {
			return "", err
		}
		p, err := part(2)
		if err != nil {
			return "", err
		}
		// TIMESTAMP_DIFF counts whole units elapsed (DuckDB's date_sub);
		// DATE_DIFF counts boundaries crossed (DuckDB's date_diff).
		fn := "date_sub"
		if name == "DATE_DIFF" {
			fn = "date_diff"
		}
		return fmt.Sprintf("%s(%s, %s, %s)", fn, p, e[1], e[0]), nil
	case name == "TIMESTAMP_TRUNC" || name == "DATETIME_TRUNC" || name == "DATE_TRUNC":
		e, err := exprs(2, 0)
		if err != nil {
			return "", err
		}
		p, err := part(1)
		if err != nil {
			return "", err
		}
		if name == "DATE_TRUNC" {
			return fmt.Sprintf("CAST(date_trunc(%s, %s) AS DATE)", p, e[0]), nil
		}
		return fmt.Sprintf("date_trunc(%s, %s)", p, e[0]), nil
	}
	// The one-argument conversions, and FORMAT_TIMESTAMP.
	templates := map[string]string{
		"DATE":              "CAST(%s AS DATE)",
		"TIMESTAMP":         "CAST(%s AS TIMESTAMPTZ)",
		"DATETIME":          "CAST(%s AS TIMESTAMP)",
		"UNIX_SECONDS":      "CAST(floor(epoch(%s)) AS BIGINT)",
		"TIMESTAMP_SECONDS": "make_timestamptz(CAST(%s AS BIGINT) * 1000000)",
		"TIMESTAMP_MILLIS":  "make_timestamptz(CAST(%s AS BIGINT) * 1000)",
		"TIMESTAMP_MICROS":  "make_timestamptz(CAST(%s AS BIGINT))",
	}
	if tmpl, ok := templates[name]; ok {
		e, err := exprs(1, 0)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf(tmpl, e[0]), nil
	}
	if name == "FORMAT_TIMESTAMP" {
		e, err := exprs(2, 0, 1)
		if err != nil {
			return "", err
		}
		return "strftime(" + e[1] + ", " + e[0] + ")", nil
	}
	return "", tr.unsupported(f, "function %s", name)
}

// cast translates CAST or SAFE_CAST (name) of args, "expr AS type".
func (tr *translator) cast(f token, name string, args []token) (string, error) {
	as := -1
	depth := 0
	for k, t := range args {
		switch {
		case t.is("("):
			depth++
		case t.is(")"):
			depth--
		case depth == 0 && t.is("AS"):
			as = k
		}
	}
	if as < 0 || as != len(args)-2 || args[as+1].kind != tkIdent {
		return "", tr.unsupported(f, "this form of %s (use %s(expr AS type) with a scalar type)", name, name)
	}
	typ, ok := castTypes[strings.ToUpper(args[as+1].text)]
	if !ok {
		return "", tr.unsupported(args[as+1], "type %s in %s", args[as+1].text, name)
	}
	expr, err := tr.tokens(args[:as])
	if err != nil {
		return "", err
	}
	fn := "CAST"
	if name == "SAFE_CAST" {
		fn = "TRY_CAST"
	}
	return fmt.Sprintf("%s(%s AS %s)", fn, expr, typ), nil
}

// extract translates EXTRACT(part FROM expr) for the parts both dialects
// mean the same by, and DATE, DAYOFWEEK (BigQuery's Sunday is 1, DuckDB's
// 0) and DAYOFYEAR.
func (tr *translator) extract(f token, args []token) (string, error) {
	if len(args) < 3 || args[0].kind != tkIdent || !args[1].is("FROM") {
		return "", tr.unsupported(f, "this form of EXTRACT")
	}
	p := strings.ToUpper(args[0].text)
	expr, err := tr.tokens(args[2:])
	if err != nil {
		return "", err
	}
	switch {
	case p == "DATE":
		return "CAST(" + expr + " AS DATE)", nil
	case p == "DAYOFWEEK":
		return "(dayofweek(" + expr + ") + 1)", nil
	case p == "DAYOFYEAR":
		return "dayofyear(" + expr + ")", nil
	case dateParts[p] && p != "MICROSECOND" && p != "MILLISECOND":
		return "EXTRACT(" + p + " FROM " + expr + ")", nil
	}
	return "", tr.unsupported(args[0], "date part %s in EXTRACT", p)
}

// resolve turns a table path into a table reference; nil for a WITH name.
func (tr *translator) resolve(parts []token) (*tableRef, error) {
	var segs []string
	for _, p := range parts {
		if p.kind == tkQuoted {
			segs = append(segs, strings.Split(p.text, ".")...)
		} else {
			segs = append(segs, p.text)
		}
	}
	t0 := parts[0]
	for _, s := range segs {
		if strings.Contains(s, "*") {
			return nil, tr.unsupported(t0, "wildcard tables (%s)", strings.Join(segs, "."))
		}
		if strings.EqualFold(s, "INFORMATION_SCHEMA") {
			return nil, tr.unsupported(t0, "INFORMATION_SCHEMA views")
		}
	}
	var ref tableRef
	switch len(segs) {
	case 1:
		if tr.ctes[strings.ToLower(segs[0])] {
			return nil, nil
		}
		if tr.defaultDataset == "" {
			l, c := lineCol(tr.q, t0.pos)
			return nil, invalidQuery("Table \"%s\" must be qualified with a dataset (e.g. dataset.table). at [%d:%d]", segs[0], l, c)
		}
		ref = tableRef{tr.project, tr.defaultDataset, segs[0]}
	case 2:
		ref = tableRef{tr.project, segs[0], segs[1]}
	case 3:
		ref = tableRef{segs[0], segs[1], segs[2]}
	default:
		l, c := lineCol(tr.q, t0.pos)
		return nil, invalidQuery("Invalid table name: %s at [%d:%d]", strings.Join(segs, "."), l, c)
	}
	if err := tr.lookup(ref); err != nil {
		return nil, err
	}
	tr.refs = append(tr.refs, ref)
	return &ref, nil
}

// legacyTable translates a legacy SQL [project:dataset.table] reference
// starting at toks[i] ("["), and returns the index of its "]".
func (tr *translator) legacyTable(toks []token, i int, out *strings.Builder) (int, error) {
	end := i + 1
	for end < len(toks) && !toks[end].is("]") {
		end++
	}
	if end >= len(toks) {
		return 0, tr.syntax(toks[i], "unclosed [")
	}
	raw := tr.q[toks[i].pos+1 : toks[end].pos]
	raw = strings.ReplaceAll(raw, ":", ".")
	var parts []token
	for _, s := range strings.Split(raw, ".") {
		parts = append(parts, token{kind: tkQuoted, text: strings.TrimSpace(s), pos: toks[i].pos})
	}
	ref, err := tr.resolve(parts)
	if err != nil {
		return 0, err
	}
	if out.Len() > 0 {
		out.WriteByte(' ')
	}
	if ref == nil {
		out.WriteString(duckIdent(parts[0].text))
		return end, nil
	}
	fmt.Fprintf(out, "bq_table(%s, %s, %s) AS %s", duckString(ref.project), duckString(ref.dataset), duckString(ref.table), duckIdent(ref.table))
	return end, nil
}

// currentLiteral renders CURRENT_TIMESTAMP() and friends as literals of
// the query's start time, so every row of a query sees one instant.
func (tr *translator) currentLiteral(word string) string {
	now := tr.now.UTC()
	switch word {
	case "CURRENT_DATE":
		return "DATE '" + now.Format("2006-01-02") + "'"
	case "CURRENT_DATETIME":
		return "TIMESTAMP '" + now.Format("2006-01-02 15:04:05.999999") + "'"
	case "CURRENT_TIME":
		return "TIME '" + now.Format("15:04:05.999999") + "'"
	}
	return "TIMESTAMPTZ '" + now.Format("2006-01-02 15:04:05.999999") + "+00'"
}

func (tr *translator) unsupported(t token, format string, args ...any) error {
	l, c := lineCol(tr.q, t.pos)
	return invalidQuery("Unsupported by the BigQuery emulator: %s at [%d:%d]. The emulator runs a subset of GoogleSQL (see README.md, \"Supported SQL\")", fmt.Sprintf(format, args...), l, c)
}

func (tr *translator) syntax(t token, format string, args ...any) error {
	return syntaxError(tr.q, t.pos, format, args...)
}

func lc(q string, pos int) [2]int {
	l, c := lineCol(q, pos)
	return [2]int{l, c}
}

// matchParen returns the index of the ")" closing the "(" at toks[open].
func matchParen(toks []token, open int) (int, error) {
	depth := 0
	for k := open; k < len(toks); k++ {
		switch {
		case toks[k].is("("):
			depth++
		case toks[k].is(")"):
			depth--
			if depth == 0 {
				return k, nil
			}
		}
	}
	return 0, fmt.Errorf("unclosed (")
}

// splitArgs splits a call's argument tokens at top-level commas.
func splitArgs(args []token) [][]token {
	var out [][]token
	depth, start := 0, 0
	for k, t := range args {
		switch {
		case t.is("("):
			depth++
		case t.is(")"):
			depth--
		case depth == 0 && t.is(","):
			out = append(out, args[start:k])
			start = k + 1
		}
	}
	return append(out, args[start:])
}

func firstOr(ts []token, def token) token {
	if len(ts) > 0 {
		return ts[0]
	}
	return def
}

func tokText(ts []token) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.text)
	}
	return strings.Join(s, " ")
}

func pathText(parts []token) string {
	var s []string
	for _, p := range parts {
		s = append(s, p.text)
	}
	return strings.Join(s, ".")
}

// identText renders one identifier: unquoted as written, quoted for DuckDB.
func identText(t token) string {
	if t.kind == tkQuoted {
		return duckIdent(t.text)
	}
	return t.text
}

// duckIdent quotes an identifier for DuckDB.
func duckIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// duckString renders a string value as a DuckDB literal (where a
// backslash is an ordinary character).
func duckString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// duckBytes renders a bytes value as a DuckDB BLOB literal.
func duckBytes(s string) string {
	var b strings.Builder
	b.WriteString("'")
	for _, x := range []byte(s) {
		b.WriteString(`\x`)
		b.WriteString(strings.ToUpper(hex.EncodeToString([]byte{x})))
	}
	b.WriteString("'::BLOB")
	return b.String()
}

// duckNumber renders a numeric literal. GoogleSQL's 1.5 is a FLOAT64 and
// DuckDB's a DECIMAL, so a literal with a point or exponent gets one.
func duckNumber(s string) string {
	low := strings.ToLower(s)
	if strings.HasPrefix(low, "0x") {
		return s
	}
	if strings.Contains(s, ".") && !strings.ContainsAny(low, "e") {
		if strings.HasPrefix(s, ".") {
			s = "0" + s
		}
		return s + "e0"
	}
	return s
}
