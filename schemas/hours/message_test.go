package hours

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"google.golang.org/protobuf/encoding/protowire"
)

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// readAll is what ReadMessage yields, copied.
func readAll(dec codec.Decoder, data []byte, attrs map[string]string, max int64) ([]string, error) {
	var got []string
	_, err := codec.ReadMessage(dec, data, attrs, max, nil, func(b []byte) bool {
		got = append(got, string(b))
		return true
	})
	return got, err
}

func TestReadMessage(t *testing.T) {
	a, b := vitalsAt("1772360130250"), vitalsAt("1772360190250")
	ndjson := a + "\n" + b + "\n"
	pretty := "[\n  " + strings.ReplaceAll(a, ",", ",\n    ") + " ,\n\t" + b + "\n]"
	nested := `{"sensor_id":"s","x":{"y":[1,"],\"{"]},"timestamp":1}`
	binary := []byte{0x00, 0xff, 0xfe, '\n', 0x80, 0x0a, 'x'}
	tests := []struct {
		name    string
		data    []byte
		attrs   map[string]string
		max     int64
		want    []string
		wantErr error
	}{
		{"NDJSON, one payload a line", []byte(ndjson), nil, 0, []string{a, b}, nil},
		{"an array, one payload an element as sent", []byte(pretty), nil, 0,
			[]string{strings.ReplaceAll(a, ",", ",\n    "), b}, nil},
		{"an array's elements may nest brackets and quotes", []byte("[" + nested + "," + a + "]"), nil, 0, []string{nested, a}, nil},
		{"an array of scalars", []byte(`[1, "a,b" ,null,-2e3]`), nil, 0, []string{"1", `"a,b"`, "null", "-2e3"}, nil},
		{"gzip by its magic bytes", gz(t, []byte(ndjson)), nil, 0, []string{a, b}, nil},
		{"gzip by its attribute", gz(t, []byte("["+a+","+b+"]")), map[string]string{"Content-Encoding": "GZIP"}, 0, []string{a, b}, nil},
		{"a gzip attribute on data that is not gzip", []byte(ndjson), map[string]string{"content-encoding": "gzip"}, 0, nil, schemas.ErrMalformed},
		{"a corrupt gzip stream", append(gz(t, []byte(ndjson))[:20:20], 0, 1, 2), nil, 0, nil, schemas.ErrMalformed},
		{"a gzip over the decompressed bound", gz(t, bytes.Repeat([]byte(a+"\n"), 1000)), nil, 64 << 10, nil, schemas.ErrTooLarge},
		{"a gzip at the decompressed bound", gz(t, []byte(ndjson)), nil, int64(len(ndjson)), []string{a, b}, nil},
		{"binary data is never split", binary, nil, 0, nil, codec.ErrNotText},
		{"binary data once decompressed is never split", gz(t, binary), nil, 0, nil, codec.ErrNotText},
	}
	c := vitalsCompiled(t, false, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(c.Decoder(), tt.data, tt.attrs, tt.max)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || len(got) != 0 {
					t.Fatalf("got %q, %v; want no reading and an error wrapping %v", got, err, tt.wantErr)
				}
				if !errors.Is(err, schemas.ErrMalformed) && !errors.Is(err, schemas.ErrTooLarge) {
					t.Errorf("%v has no dead-letter reason", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("got %q; want %q", got, tt.want)
			}
			for i, p := range got {
				if _, err := c.Decoder().ParseInput(nil, p, "sub", codec.Input{}); err != nil && strings.HasPrefix(p, `{"sensor_id":"s","timestamp"`) {
					t.Errorf("payload %d does not parse: %v", i, err)
				}
			}
		})
	}
}

// TestReadMessageOfManyReadings reads a message of 60,000 NDJSON readings
// (about 8 MB), and the same as one JSON array: each reading is yielded
// as a slice of the message, in order.
func TestReadMessageOfManyReadings(t *testing.T) {
	const n = 60000
	var nd, arr bytes.Buffer
	arr.WriteByte('[')
	for i := 0; i < n; i++ {
		r := fmt.Sprintf(`{"sensor_id":"s-%05d","timestamp":%d,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87,"pad":"%s"}`,
			i, 1772360130250+int64(i), strings.Repeat("x", 20))
		nd.WriteString(r + "\n")
		if i > 0 {
			arr.WriteByte(',')
		}
		arr.WriteString(r)
	}
	arr.WriteByte(']')
	c := vitalsCompiled(t, false, nil)
	for name, data := range map[string][]byte{"NDJSON": nd.Bytes(), "array": arr.Bytes(), "gzipped NDJSON": gz(t, nd.Bytes())} {
		t.Run(name, func(t *testing.T) {
			count := 0
			_, err := codec.ReadMessage(c.Decoder(), data, nil, 0, nil, func(b []byte) bool {
				if want := fmt.Sprintf(`{"sensor_id":"s-%05d"`, count); !bytes.HasPrefix(b, []byte(want)) {
					t.Fatalf("reading %d is %.40q", count, b)
				}
				count++
				return true
			})
			if err != nil || count != n {
				t.Fatalf("%d readings, %v; want %d", count, err, n)
			}
		})
	}
}

func TestReadMessageStopsWhenAsked(t *testing.T) {
	c := vitalsCompiled(t, false, nil)
	n := 0
	_, err := codec.ReadMessage(c.Decoder(), []byte("[1,2,3]"), nil, 0, nil, func([]byte) bool { n++; return false })
	if err != nil || n != 1 {
		t.Errorf("%d yields, %v; want 1", n, err)
	}
}

func TestProtoReadingsCheckTheWholeBatchFirst(t *testing.T) {
	s, _ := schemas.BuiltinSpec("vitals")
	c, err := Compile(s, CompileOptions{Format: "proto"})
	if err != nil {
		t.Fatal(err)
	}
	pc, _ := codec.NewProtoCodec(s)
	r, err := pc.AppendProto(nil, []byte(vitalsAt("1772360130250")))
	if err != nil {
		t.Fatal(err)
	}
	var batch []byte
	for i := 0; i < 3; i++ {
		batch = protowire.AppendTag(batch, 1, protowire.BytesType)
		batch = protowire.AppendBytes(batch, r)
	}
	got, err := readAll(c.Decoder(), gz(t, batch), nil, 0)
	if err != nil || len(got) != 3 || got[2] != string(r) {
		t.Fatalf("a gzipped batch: %d readings, %v; want 3", len(got), err)
	}
	broken := append(append([]byte(nil), batch...), 0x0a, 0x10, 1)
	got, err = readAll(c.Decoder(), broken, nil, 0)
	if !errors.Is(err, schemas.ErrMalformed) || len(got) != 0 {
		t.Errorf("a batch broken at its end: %d readings, %v; want none and malformed", len(got), err)
	}
}

func TestIsGzip(t *testing.T) {
	tests := []struct {
		data  string
		attrs map[string]string
		want  bool
	}{
		{"\x1f\x8b\x08", nil, true},
		{"{}", nil, false},
		{"{}", map[string]string{"content-encoding": " gzip "}, true},
		{"{}", map[string]string{"content-encoding": "identity"}, false},
		{"\x1f", nil, false},
	}
	for _, tt := range tests {
		if got := codec.IsGzip([]byte(tt.data), tt.attrs); got != tt.want {
			t.Errorf("IsGzip(%q, %v) = %v; want %v", tt.data, tt.attrs, got, tt.want)
		}
	}
}
