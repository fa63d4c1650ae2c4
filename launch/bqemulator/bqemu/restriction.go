package bqemu

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode"

	bq "google.golang.org/api/bigquery/v2"
)

// rowFilter is a compiled Storage Read row restriction: it reports whether
// a stored row (aligned with the table schema) passes.
type rowFilter func(row []any) bool

// compileRestriction compiles a ReadSession's row_restriction against the
// table's top-level fields. The emulator takes a conjunction of simple
// predicates, which covers the partition and time filters readers send:
//
//	restriction := term { AND term }
//	term        := '(' restriction ')' | operand op operand | column IS [NOT] NULL
//	op          := = | != | <> | < | <= | > | >=
//	operand     := column | literal
//	literal     := 'text' | "text" | number | TRUE | FALSE
//	             | TIMESTAMP 'text' | DATE 'text' | DATETIME 'text' (or TYPE('text'))
//
// A predicate compares one column with one literal; the literal is read as
// the column's type (a TIMESTAMP column takes a date-time text). Anything
// else (OR, NOT, functions, nested columns, two columns compared) is an
// error naming what is unsupported. An empty restriction passes every row.
func compileRestriction(fields []*bq.TableFieldSchema, restriction string) (rowFilter, error) {
	toks, err := lexRestriction(restriction)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return func([]any) bool { return true }, nil
	}
	p := &restrictionParser{toks: toks, fields: fields}
	preds, err := p.conjunction()
	if err != nil {
		return nil, err
	}
	if !p.done() {
		return nil, fmt.Errorf("row restriction: unsupported %q: the emulator takes predicates joined by AND (column op literal, column IS [NOT] NULL)", p.rest())
	}
	return func(row []any) bool {
		for _, pr := range preds {
			if !pr(row) {
				return false
			}
		}
		return true
	}, nil
}

type tokKind int

const (
	tokIdent tokKind = iota
	tokString
	tokNumber
	tokOp
	tokLParen
	tokRParen
	tokComma
)

type token struct {
	kind tokKind
	text string
	pos  int
}

// lexRestriction splits a restriction into tokens.
func lexRestriction(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			out = append(out, token{tokLParen, "(", i})
			i++
		case c == ')':
			out = append(out, token{tokRParen, ")", i})
			i++
		case c == ',':
			out = append(out, token{tokComma, ",", i})
			i++
		case c == '\'' || c == '"':
			j := i + 1
			var b strings.Builder
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("row restriction: unterminated string at offset %d", i)
			}
			out = append(out, token{tokString, b.String(), i})
			i = j + 1
		case c == '`':
			j := strings.IndexByte(s[i+1:], '`')
			if j < 0 {
				return nil, fmt.Errorf("row restriction: unterminated quoted name at offset %d", i)
			}
			out = append(out, token{tokIdent, s[i+1 : i+1+j], i})
			i += j + 2
		case strings.ContainsRune("=<>!", rune(c)):
			j := i + 1
			if j < len(s) && (s[j] == '=' || (c == '<' && s[j] == '>')) {
				j++
			}
			op := s[i:j]
			if op == "!" {
				return nil, fmt.Errorf("row restriction: unsupported operator ! at offset %d", i)
			}
			out = append(out, token{tokOp, op, i})
			i = j
		case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E' || (s[j] >= '0' && s[j] <= '9') ||
				((s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E'))) {
				j++
			}
			out = append(out, token{tokNumber, s[i:j], i})
			i = j
		case c == '_' || unicode.IsLetter(rune(c)):
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] == '.' || unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j]))) {
				j++
			}
			out = append(out, token{tokIdent, s[i:j], i})
			i = j
		default:
			return nil, fmt.Errorf("row restriction: unsupported %q at offset %d", s[i:], i)
		}
	}
	return out, nil
}

type restrictionParser struct {
	toks   []token
	i      int
	fields []*bq.TableFieldSchema
}

func (p *restrictionParser) done() bool { return p.i >= len(p.toks) }

func (p *restrictionParser) peek() *token {
	if p.done() {
		return nil
	}
	return &p.toks[p.i]
}

func (p *restrictionParser) keyword(words ...string) bool {
	t := p.peek()
	return t != nil && t.kind == tokIdent && len(words) > 0 && strings.EqualFold(t.text, words[0])
}

func (p *restrictionParser) rest() string {
	var parts []string
	for _, t := range p.toks[p.i:] {
		if t.kind == tokString {
			parts = append(parts, strconv.Quote(t.text))
		} else {
			parts = append(parts, t.text)
		}
	}
	return strings.Join(parts, " ")
}

func (p *restrictionParser) conjunction() ([]rowFilter, error) {
	var preds []rowFilter
	for {
		got, err := p.term()
		if err != nil {
			return nil, err
		}
		preds = append(preds, got...)
		if !p.keyword("AND") {
			return preds, nil
		}
		p.i++
	}
}

func (p *restrictionParser) term() ([]rowFilter, error) {
	t := p.peek()
	if t == nil {
		return nil, fmt.Errorf("row restriction: a predicate is missing at its end")
	}
	if t.kind == tokLParen {
		p.i++
		preds, err := p.conjunction()
		if err != nil {
			return nil, err
		}
		if t := p.peek(); t == nil || t.kind != tokRParen {
			return nil, fmt.Errorf("row restriction: unsupported %q: expected ) (the emulator takes predicates joined by AND)", p.rest())
		}
		p.i++
		return preds, nil
	}
	if p.keyword("NOT") {
		return nil, fmt.Errorf("row restriction: unsupported NOT: the emulator takes predicates joined by AND (column op literal, column IS [NOT] NULL)")
	}
	left, err := p.operand()
	if err != nil {
		return nil, err
	}
	if p.keyword("IS") {
		p.i++
		not := false
		if p.keyword("NOT") {
			not = true
			p.i++
		}
		if !p.keyword("NULL") || left.col < 0 {
			return nil, fmt.Errorf("row restriction: unsupported %q: IS takes a column and NULL or NOT NULL", p.rest())
		}
		p.i++
		idx := left.col
		return []rowFilter{func(row []any) bool { return (idx < len(row) && row[idx] != nil) == not }}, nil
	}
	opTok := p.peek()
	if opTok == nil || opTok.kind != tokOp {
		if opTok == nil {
			return nil, fmt.Errorf("row restriction: a comparison is missing its operator at its end")
		}
		return nil, fmt.Errorf("row restriction: unsupported %q: expected a comparison operator (= != <> < <= > >=)", p.rest())
	}
	p.i++
	right, err := p.operand()
	if err != nil {
		return nil, err
	}
	op := opTok.text
	switch {
	case left.col >= 0 && right.col < 0:
	case left.col < 0 && right.col >= 0:
		left, right = right, left
		op = flipOp(op)
	case left.col >= 0:
		return nil, fmt.Errorf("row restriction: unsupported comparison of two columns (%s, %s): compare a column with a literal", left.text, right.text)
	default:
		return nil, fmt.Errorf("row restriction: unsupported comparison of two literals: compare a column with a literal")
	}
	f := p.fields[left.col]
	lit, err := literalValue(f, right)
	if err != nil {
		return nil, err
	}
	idx := left.col
	return []rowFilter{func(row []any) bool {
		if idx >= len(row) || row[idx] == nil {
			return false
		}
		c, ok := compareStored(f.Type, row[idx], lit)
		if !ok {
			return false
		}
		switch op {
		case "=":
			return c == 0
		case "!=", "<>":
			return c != 0
		case "<":
			return c < 0
		case "<=":
			return c <= 0
		case ">":
			return c > 0
		default: // ">="
			return c >= 0
		}
	}}, nil
}

func flipOp(op string) string {
	switch op {
	case "<":
		return ">"
	case "<=":
		return ">="
	case ">":
		return "<"
	case ">=":
		return "<="
	}
	return op
}

// operand is a column (col >= 0) or a literal: its text, its token kind
// and the type keyword before it ("" when none).
type operand struct {
	col      int
	text     string
	kind     tokKind
	typeWord string
}

func (p *restrictionParser) operand() (operand, error) {
	t := p.peek()
	if t == nil {
		return operand{}, fmt.Errorf("row restriction: a comparison is missing its operand at its end")
	}
	switch t.kind {
	case tokString, tokNumber:
		p.i++
		return operand{col: -1, text: t.text, kind: t.kind}, nil
	case tokIdent:
		up := strings.ToUpper(t.text)
		switch up {
		case "TRUE", "FALSE":
			p.i++
			return operand{col: -1, text: up, kind: tokIdent}, nil
		case "NULL":
			return operand{}, fmt.Errorf("row restriction: unsupported comparison with NULL: use column IS NULL")
		case "TIMESTAMP", "DATE", "DATETIME":
			if p.i+1 < len(p.toks) {
				next := p.toks[p.i+1]
				if next.kind == tokString {
					p.i += 2
					return operand{col: -1, text: next.text, kind: tokString, typeWord: up}, nil
				}
				if next.kind == tokLParen && p.i+3 < len(p.toks) && p.toks[p.i+2].kind == tokString && p.toks[p.i+3].kind == tokRParen {
					s := p.toks[p.i+2].text
					p.i += 4
					return operand{col: -1, text: s, kind: tokString, typeWord: up}, nil
				}
			}
		}
		if p.i+1 < len(p.toks) && p.toks[p.i+1].kind == tokLParen {
			return operand{}, fmt.Errorf("row restriction: unsupported function %s: compare a column with a literal", t.text)
		}
		if strings.Contains(t.text, ".") {
			return operand{}, fmt.Errorf("row restriction: unsupported nested column %s: the emulator filters on top-level columns", t.text)
		}
		idx := fieldIndex(p.fields, t.text)
		if idx < 0 {
			return operand{}, fmt.Errorf("row restriction: unrecognized name: %s", t.text)
		}
		p.i++
		return operand{col: idx, text: t.text}, nil
	}
	return operand{}, fmt.Errorf("row restriction: unsupported %q", p.rest())
}

// literalValue converts a literal to the stored form of a value of f.
func literalValue(f *bq.TableFieldSchema, o operand) (any, error) {
	if f.Mode == "REPEATED" || f.Type == "RECORD" {
		return nil, fmt.Errorf("row restriction: unsupported comparison on %s column %s", strings.ToLower(f.Mode+" "+f.Type), f.Name)
	}
	bad := func(err error) error {
		return fmt.Errorf("row restriction: %s is not a %s value for column %s: %v", o.text, f.Type, f.Name, err)
	}
	switch f.Type {
	case "TIMESTAMP":
		if o.kind != tokString {
			return nil, bad(fmt.Errorf("give TIMESTAMP 'YYYY-MM-DD HH:MM:SS[.ffffff][+zone]'"))
		}
		us, err := parseTimestamp(o.text)
		if err != nil {
			return nil, bad(err)
		}
		return us, nil
	case "DATE":
		v, err := parseScalar("DATE", o.text, false)
		if err != nil {
			return nil, bad(err)
		}
		return v, nil
	case "DATETIME":
		s, err := parseDateTime(o.text)
		if err != nil {
			return nil, bad(err)
		}
		return s, nil
	case "STRING", "GEOGRAPHY", "JSON":
		if o.kind != tokString {
			return nil, bad(fmt.Errorf("give a quoted string"))
		}
		return o.text, nil
	case "BYTES":
		if o.kind != tokString {
			return nil, bad(fmt.Errorf("give a quoted string"))
		}
		return []byte(o.text), nil
	case "INTEGER":
		n, err := strconv.ParseInt(o.text, 10, 64)
		if err != nil {
			return nil, bad(err)
		}
		return n, nil
	case "FLOAT":
		x, err := strconv.ParseFloat(o.text, 64)
		if err != nil {
			return nil, bad(err)
		}
		return x, nil
	case "NUMERIC", "BIGNUMERIC":
		r, ok := new(big.Rat).SetString(o.text)
		if !ok {
			return nil, bad(fmt.Errorf("not a decimal"))
		}
		return r, nil
	case "BOOLEAN":
		switch o.text {
		case "TRUE":
			return true, nil
		case "FALSE":
			return false, nil
		}
		return nil, bad(fmt.Errorf("give TRUE or FALSE"))
	case "TIME":
		s, err := parseTimeOfDay(o.text)
		if err != nil {
			return nil, bad(err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("row restriction: unsupported comparison on %s column %s", f.Type, f.Name)
}

// compareStored compares a stored value with a literal of the same type.
func compareStored(typ string, v, lit any) (int, bool) {
	switch typ {
	case "TIMESTAMP", "DATE", "INTEGER":
		a, ok1 := v.(int64)
		b, ok2 := lit.(int64)
		if !ok1 || !ok2 {
			return 0, false
		}
		return cmp3(a < b, a > b), true
	case "FLOAT":
		a, ok1 := v.(float64)
		b, ok2 := lit.(float64)
		if !ok1 || !ok2 {
			return 0, false
		}
		return cmp3(a < b, a > b), true
	case "BOOLEAN":
		a, ok1 := v.(bool)
		b, ok2 := lit.(bool)
		if !ok1 || !ok2 {
			return 0, false
		}
		return cmp3(!a && b, a && !b), true
	case "NUMERIC", "BIGNUMERIC":
		s, ok1 := v.(string)
		b, ok2 := lit.(*big.Rat)
		a, ok3 := new(big.Rat).SetString(s)
		if !ok1 || !ok2 || !ok3 {
			return 0, false
		}
		return a.Cmp(b), true
	case "BYTES":
		a, ok1 := v.([]byte)
		b, ok2 := lit.([]byte)
		if !ok1 || !ok2 {
			return 0, false
		}
		return strings.Compare(string(a), string(b)), true
	default: // STRING, DATETIME, TIME, GEOGRAPHY, JSON: stored as text
		a, ok1 := v.(string)
		b, ok2 := lit.(string)
		if !ok1 || !ok2 {
			return 0, false
		}
		return strings.Compare(a, b), true
	}
}

func cmp3(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}
