package codec

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/valyala/fastjson"
	"google.golang.org/protobuf/encoding/protowire"
)

// MaxPubSubMessageBytes is the largest message Pub/Sub takes (data and
// attributes): https://cloud.google.com/pubsub/quotas#resource_limits.
const MaxPubSubMessageBytes = 10_000_000

// DefaultMaxDecompressedBytes is the default bound on a compressed
// message's size once decompressed: room for a 10 MB message of text
// compressed about six times, and a bound on what a zip bomb can take.
const DefaultMaxDecompressedBytes = 64 << 20

// DecompressedLimit is the limit a MaxDecompressedBytes setting means: n,
// or DefaultMaxDecompressedBytes when n is 0 or less.
func DecompressedLimit(n int64) int64 {
	if n <= 0 {
		return DefaultMaxDecompressedBytes
	}
	return n
}

// gzipMagic starts every gzip stream (RFC 1952, section 2.3.1). Neither a
// JSON text nor a protobuf message can start with it: 0x1f is no JSON
// token, and a protobuf tag of wire type 7 does not exist.
var gzipMagic = []byte{0x1f, 0x8b}

// ContentEncodingAttribute is the message attribute that may say a
// message is compressed ("gzip"), as HTTP's Content-Encoding does.
const ContentEncodingAttribute = "content-encoding"

// IsGzip reports whether a message of data and attrs is gzip-compressed:
// it starts with gzip's magic bytes, or its content-encoding attribute
// (any case) says gzip.
func IsGzip(data []byte, attrs map[string]string) bool {
	if bytes.HasPrefix(data, gzipMagic) {
		return true
	}
	for k, v := range attrs {
		if strings.EqualFold(k, ContentEncodingAttribute) && strings.EqualFold(strings.TrimSpace(v), "gzip") {
			return true
		}
	}
	return false
}

// Gunzip appends the decompression of data to dst. A corrupt stream is an
// error wrapping ErrMalformed; one whose decompression is over max bytes an
// error wrapping ErrTooLarge (reading stops there, so a zip bomb costs at
// most max bytes).
func Gunzip(dst, data []byte, max int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return dst, fmt.Errorf("%w: the message is not a valid gzip stream: %w", schemas.ErrMalformed, err)
	}
	buf := bytes.NewBuffer(dst)
	n, err := buf.ReadFrom(io.LimitReader(zr, max+1))
	if err != nil {
		return buf.Bytes(), fmt.Errorf("%w: the message is not a valid gzip stream: %w", schemas.ErrMalformed, err)
	}
	if n > max {
		return buf.Bytes(), fmt.Errorf("%w: the gzip message decompresses to more than %d bytes (--max_decompressed_message_bytes); the payload kept is the whole message as received", schemas.ErrTooLarge, max)
	}
	return buf.Bytes(), nil
}

// ReadMessage calls yield with the payload of each reading a Pub/Sub
// message carries, in order, as dec.Readings cuts them, after
// decompressing a gzip message (IsGzip) into buf, whose storage it may
// reuse and returns. A payload is a slice of data (or of buf): copy what
// is kept after yield returns. Stopping early (yield returns false) is not
// an error. An error is the message's own: a corrupt gzip stream or one
// over maxDecompressed bytes, data that is not text where text is read,
// or a broken protobuf batch; it comes before any payload, and the whole
// message as received is its dead letter.
func ReadMessage(dec Decoder, data []byte, attrs map[string]string, maxDecompressed int64, buf []byte, yield func([]byte) bool) ([]byte, error) {
	if IsGzip(data, attrs) {
		var err error
		if buf, err = Gunzip(buf[:0], data, DecompressedLimit(maxDecompressed)); err != nil {
			return buf, err
		}
		data = buf
	}
	return buf, dec.Readings(data, yield)
}

// ErrNotText is wrapped, with ErrMalformed, by the error of a JSON message
// that is not valid UTF-8: it is never cut into readings.
var ErrNotText = errors.New("the message is not text (not valid UTF-8); it is kept whole")

// Readings calls yield with the payload of each reading a Pub/Sub
// message's data carries, as a file is read: one per non-blank line
// (NDJSON), so a message of one reading is that one payload unchanged.
// Data that is one JSON array gives one payload per element, as sent; one
// JSON object written over several lines stays whole. Data that is not
// JSON at all is one payload (its dead letter says why), and data that is
// not valid UTF-8 an error wrapping ErrMalformed and ErrNotText. Each
// payload is a slice of data: nothing is copied or held beside it.
func (p *Parser) Readings(data []byte, yield func([]byte) bool) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("%w: %w", schemas.ErrMalformed, ErrNotText)
	}
	t := bytes.TrimSpace(bytes.TrimPrefix(data, []byte(utf8BOM)))
	switch {
	case len(t) == 0:
		return nil
	case t[0] == '[':
		if fastjson.ValidateBytes(t) != nil {
			yield(data)
			return nil
		}
		eachElement(t, yield)
		return nil
	case bytes.IndexByte(t, '\n') < 0, fastjson.ValidateBytes(t) == nil:
		yield(data)
		return nil
	}
	for len(t) > 0 {
		line := t
		if i := bytes.IndexByte(t, '\n'); i >= 0 {
			line, t = t[:i], t[i+1:]
		} else {
			t = nil
		}
		if line = bytes.TrimSpace(line); len(line) > 0 && !yield(line) {
			return nil
		}
	}
	return nil
}

// eachElement yields the elements of arr, a valid JSON array, each
// without the white space around it.
func eachElement(arr []byte, yield func([]byte) bool) {
	i := 1 // past '['
	for {
		i = skipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		end := valueEnd(arr, i)
		if !yield(arr[i:end]) {
			return
		}
		i = skipSpace(arr, end)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd is the end of the JSON value starting at b[i], in valid JSON.
func valueEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			i = stringEnd(b, i) - 1
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// stringEnd is the index past the closing quote of the JSON string that
// opens at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// Readings calls yield with each element of the declared batch wrapper's
// repeated field, in order (fields of other numbers are skipped, as
// protobuf skips unknown fields), or with the whole data as one reading
// when the spec declares no batch. The wrapper is checked whole first:
// data that is not such a wrapper is an error wrapping ErrMalformed, and
// no reading is yielded. Each reading is a slice of data.
func (p *ProtoParser) Readings(data []byte, yield func([]byte) bool) error {
	if p.batch == nil {
		yield(data)
		return nil
	}
	if err := p.eachElement(data, func([]byte) bool { return true }); err != nil {
		return err
	}
	return p.eachElement(data, yield)
}

func (p *ProtoParser) eachElement(data []byte, yield func([]byte) bool) error {
	for b := data; len(b) > 0; {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: not a %s protobuf: %w", schemas.ErrMalformed, p.batch.Message, protowire.ParseError(n))
		}
		b = b[n:]
		if num == protowire.Number(p.batch.Number) && wt == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: not a %s protobuf: %w", schemas.ErrMalformed, p.batch.Message, protowire.ParseError(n))
			}
			if !yield(v) {
				return nil
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, wt, b)
		if n < 0 {
			return fmt.Errorf("%w: not a %s protobuf: %w", schemas.ErrMalformed, p.batch.Message, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

// splitReadings collects what dec.Readings yields, copied.
func splitReadings(dec interface {
	Readings([]byte, func([]byte) bool) error
}, data []byte) ([]string, error) {
	var out []string
	err := dec.Readings(data, func(b []byte) bool {
		out = append(out, string(b))
		return true
	})
	return out, err
}
