package sqlengine

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// tokKind is a GoogleSQL token's kind.
type tokKind int

const (
	tkSpace  tokKind = iota // whitespace and comments
	tkIdent                 // unquoted identifier or keyword
	tkQuoted                // `quoted identifier` (text: unquoted)
	tkString                // string literal (text: value)
	tkBytes                 // bytes literal (text: value)
	tkNumber                // numeric literal
	tkParam                 // @param or ?
	tkOp                    // punctuation and operators
)

// token is one lexeme; text is the raw text, except for quoted
// identifiers and literals, where it is the unescaped value. pos is the
// byte offset in the query, for messages.
type token struct {
	kind tokKind
	text string
	pos  int
}

// is reports whether t is the keyword or operator s (keywords compare
// case-insensitively).
func (t token) is(s string) bool {
	switch t.kind {
	case tkIdent:
		return strings.EqualFold(t.text, s)
	case tkOp:
		return t.text == s
	}
	return false
}

// lex splits a GoogleSQL query into tokens.
func lex(q string) ([]token, error) {
	var out []token
	i := 0
	for i < len(q) {
		c := q[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			for i < len(q) && strings.IndexByte(" \t\n\r\f", q[i]) >= 0 {
				i++
			}
			out = append(out, token{tkSpace, q[start:i], start})
		case c == '#' || (c == '-' && strings.HasPrefix(q[i:], "--")):
			for i < len(q) && q[i] != '\n' {
				i++
			}
			out = append(out, token{tkSpace, " ", start})
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return nil, syntaxError(q, start, "unclosed comment")
			}
			i += end + 4
			out = append(out, token{tkSpace, " ", start})
		case c == '`':
			v, n, err := unquote(q[i:], "`", false)
			if err != nil {
				return nil, syntaxError(q, start, "%v", err)
			}
			i += n
			out = append(out, token{tkQuoted, v, start})
		case c == '\'' || c == '"':
			v, n, err := lexString(q[i:], false)
			if err != nil {
				return nil, syntaxError(q, start, "%v", err)
			}
			i += n
			out = append(out, token{tkString, v, start})
		case (c == 'r' || c == 'R' || c == 'b' || c == 'B') && prefixedLiteral(q[i:]) > 0:
			// Prefixed literals: r'…', b'…', rb'…', br'…'.
			j := i + prefixedLiteral(q[i:])
			prefix := strings.ToLower(q[i:j])
			v, n, err := lexString(q[j:], strings.Contains(prefix, "r"))
			if err != nil {
				return nil, syntaxError(q, start, "%v", err)
			}
			i = j + n
			kind := tkString
			if strings.Contains(prefix, "b") {
				kind = tkBytes
			}
			out = append(out, token{kind, v, start})
		case isIdentStart(c):
			i = lexIdent(q, i)
			out = append(out, token{tkIdent, q[start:i], start})
		case c >= '0' && c <= '9' || (c == '.' && i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9'):
			i = lexNumber(q, i)
			out = append(out, token{tkNumber, q[start:i], start})
		case c == '@' || c == '?':
			i++
			for i < len(q) && (isIdentStart(q[i]) || q[i] >= '0' && q[i] <= '9' || q[i] == '@') {
				i++
			}
			out = append(out, token{tkParam, q[start:i], start})
		default:
			for _, op := range []string{"<=", ">=", "<>", "!=", "||", "<<", ">>", "::", "=>"} {
				if strings.HasPrefix(q[i:], op) {
					i += len(op)
					out = append(out, token{tkOp, op, start})
					goto next
				}
			}
			if strings.IndexByte("()[]{},.;*+-/%=<>!|&^~:", c) < 0 {
				r, _ := utf8.DecodeRuneInString(q[i:])
				return nil, syntaxError(q, start, "Illegal input character %q", r)
			}
			i++
			out = append(out, token{tkOp, q[start:i], start})
		next:
		}
	}
	return out, nil
}

// prefixedLiteral returns the length of the r/b/rb/br prefix of a literal
// at the start of s, or 0 when s does not start with a prefixed literal.
func prefixedLiteral(s string) int {
	p := strings.ToLower(s[:min(len(s), 3)])
	for _, pre := range []string{"rb", "br", "r", "b"} {
		if strings.HasPrefix(p, pre) && len(s) > len(pre) && (s[len(pre)] == '\'' || s[len(pre)] == '"') {
			return len(pre)
		}
	}
	return 0
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func lexIdent(q string, i int) int {
	for i < len(q) && (isIdentStart(q[i]) || q[i] >= '0' && q[i] <= '9') {
		i++
	}
	return i
}

func lexNumber(q string, i int) int {
	if strings.HasPrefix(q[i:], "0x") || strings.HasPrefix(q[i:], "0X") {
		i += 2
		for i < len(q) && strings.IndexByte("0123456789abcdefABCDEF", q[i]) >= 0 {
			i++
		}
		return i
	}
	for i < len(q) && (q[i] >= '0' && q[i] <= '9' || q[i] == '.') {
		i++
	}
	if i < len(q) && (q[i] == 'e' || q[i] == 'E') {
		j := i + 1
		if j < len(q) && (q[j] == '+' || q[j] == '-') {
			j++
		}
		if j < len(q) && q[j] >= '0' && q[j] <= '9' {
			i = j
			for i < len(q) && q[i] >= '0' && q[i] <= '9' {
				i++
			}
		}
	}
	return i
}

// lexString reads a string literal at the start of s ('…', "…", ”'…”' or
// """…"""), returning its value and length.
func lexString(s string, raw bool) (string, int, error) {
	q := s[:1]
	if strings.HasPrefix(s, q+q+q) {
		q = q + q + q
	}
	return unquote(s, q, raw)
}

// unquote reads a literal delimited by quote at the start of s, resolving
// GoogleSQL's backslash escapes unless raw.
func unquote(s, quote string, raw bool) (string, int, error) {
	var b strings.Builder
	i := len(quote)
	for i < len(s) {
		if strings.HasPrefix(s[i:], quote) {
			return b.String(), i + len(quote), nil
		}
		c := s[i]
		if c == '\n' && len(quote) == 1 && quote != "`" {
			return "", 0, fmt.Errorf("unclosed string literal")
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		if raw {
			b.WriteByte(c)
			b.WriteByte(s[i+1])
			i += 2
			continue
		}
		e := s[i+1]
		i += 2
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '`', '?':
			b.WriteByte(e)
		case 'x', 'X':
			if i+2 > len(s) {
				return "", 0, fmt.Errorf("illegal escape sequence")
			}
			var v byte
			if _, err := fmt.Sscanf(s[i:i+2], "%02x", &v); err != nil {
				return "", 0, fmt.Errorf("illegal escape sequence \\x%s", s[i:i+2])
			}
			b.WriteByte(v)
			i += 2
		case 'u', 'U':
			n := 4
			if e == 'U' {
				n = 8
			}
			if i+n > len(s) {
				return "", 0, fmt.Errorf("illegal escape sequence")
			}
			var r rune
			if _, err := fmt.Sscanf(s[i:i+n], "%x", &r); err != nil {
				return "", 0, fmt.Errorf("illegal escape sequence \\%c%s", e, s[i:i+n])
			}
			b.WriteRune(r)
			i += n
		default:
			return "", 0, fmt.Errorf("illegal escape sequence \\%c", e)
		}
	}
	return "", 0, fmt.Errorf("unclosed literal (missing %s)", quote)
}

// lineCol is the 1-based line and column of byte offset pos in q, as
// BigQuery's messages give them ("at [1:8]").
func lineCol(q string, pos int) (int, int) {
	line, col := 1, 1
	for i := 0; i < pos && i < len(q); i++ {
		if q[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// syntaxError is BigQuery's "Syntax error: … at [line:col]".
func syntaxError(q string, pos int, format string, args ...any) error {
	l, c := lineCol(q, pos)
	return invalidQuery("Syntax error: %s at [%d:%d]", fmt.Sprintf(format, args...), l, c)
}
