package bqemu

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	bq "google.golang.org/api/bigquery/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	// Register well-known types that writer schemas may reference.
	_ "google.golang.org/protobuf/types/known/timestamppb"
	_ "google.golang.org/protobuf/types/known/wrapperspb"
)

// messageDescriptor builds (and caches) a message descriptor from the
// self-contained DescriptorProto a Storage Write client sends as its writer
// schema. The descriptor is interpreted with proto2 semantics, as BigQuery
// does.
func (s *Server) messageDescriptor(dp *descriptorpb.DescriptorProto) (protoreflect.MessageDescriptor, error) {
	if dp == nil {
		return nil, fmt.Errorf("writer schema has no proto descriptor")
	}
	key, err := proto.MarshalOptions{Deterministic: true}.Marshal(dp)
	if err != nil {
		return nil, fmt.Errorf("encoding proto descriptor: %w", err)
	}
	if md, ok := s.descCache.Load(string(key)); ok {
		return md.(protoreflect.MessageDescriptor), nil
	}
	cp := proto.CloneOf(dp)
	clearProto3Optional(cp)
	deps := map[string]bool{}
	collectDeps(cp, deps)
	sum := sha256.Sum256(key)
	fdp := &descriptorpb.FileDescriptorProto{
		Name:        proto.String(fmt.Sprintf("bqemu/writer_%x.proto", sum[:8])),
		Package:     proto.String("bqemu.writer"),
		Syntax:      proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{cp},
	}
	for d := range deps {
		fdp.Dependency = append(fdp.Dependency, d)
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		return nil, fmt.Errorf("invalid proto descriptor: %w", err)
	}
	md := fd.Messages().Get(0)
	s.descCache.Store(string(key), md)
	return md, nil
}

func clearProto3Optional(dp *descriptorpb.DescriptorProto) {
	for _, f := range dp.Field {
		f.Proto3Optional = nil
		f.OneofIndex = nil
	}
	dp.OneofDecl = nil
	for _, n := range dp.NestedType {
		clearProto3Optional(n)
	}
}

// collectDeps records the files defining fully-qualified type references.
func collectDeps(dp *descriptorpb.DescriptorProto, deps map[string]bool) {
	for _, f := range dp.Field {
		tn := f.GetTypeName()
		if !strings.HasPrefix(tn, ".") {
			continue
		}
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(tn[1:]))
		if err == nil {
			deps[d.ParentFile().Path()] = true
		}
	}
	for _, n := range dp.NestedType {
		collectDeps(n, deps)
	}
}

// colPlan maps one table column to the proto field carrying it.
type colPlan struct {
	field   *bq.TableFieldSchema
	path    string
	fd      protoreflect.FieldDescriptor // nil: column absent from the writer schema
	wrapper protoreflect.FieldDescriptor // set when fd is a wrapper message; its "value" field
	sub     []colPlan                    // RECORD columns
}

// compilePlan checks a writer schema against table columns. Errors name the
// offending field.
func compilePlan(md protoreflect.MessageDescriptor, fields []*bq.TableFieldSchema, path string) ([]colPlan, *fieldError) {
	byName := make(map[string]int, len(fields))
	for i, f := range fields {
		byName[strings.ToLower(f.Name)] = i
	}
	plan := make([]colPlan, len(fields))
	for i, f := range fields {
		plan[i] = colPlan{field: f, path: joinPath(path, f.Name)}
	}
	pfs := md.Fields()
	var extra []string
	for i := 0; i < pfs.Len(); i++ {
		fd := pfs.Get(i)
		if path == "" && isPseudoColumn(string(fd.Name())) {
			continue // CDC pseudo-columns: see cdcPlan
		}
		ci, ok := byName[strings.ToLower(string(fd.Name()))]
		if !ok {
			extra = append(extra, joinPath(path, string(fd.Name())))
			continue
		}
		p := &plan[ci]
		p.fd = fd
		f := p.field
		if fd.IsMap() {
			return nil, mismatch(p.path, "map", f)
		}
		if fd.IsList() != (f.Mode == "REPEATED") {
			if fd.IsList() {
				return nil, &fieldError{location: p.path, message: fmt.Sprintf("The proto field mismatched with BigQuery field at %s, the proto field is repeated but the BigQuery field mode is %s.", p.path, f.Mode)}
			}
			return nil, &fieldError{location: p.path, message: fmt.Sprintf("The proto field mismatched with BigQuery field at %s, the proto field is not repeated but the BigQuery field mode is REPEATED.", p.path)}
		}
		if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
			if v := wrapperValueField(fd.Message()); v != nil {
				p.wrapper = v
				if !kindCompatible(f.Type, v) {
					return nil, mismatch(p.path, kindName(v), f)
				}
				continue
			}
			if f.Type == "TIMESTAMP" && isTimestampMessage(fd.Message()) {
				continue
			}
			if f.Type != "RECORD" {
				return nil, mismatch(p.path, "message", f)
			}
			sub, ferr := compilePlan(fd.Message(), f.Fields, p.path)
			if ferr != nil {
				return nil, ferr
			}
			p.sub = sub
			continue
		}
		if !kindCompatible(f.Type, fd) {
			return nil, mismatch(p.path, kindName(fd), f)
		}
	}
	if len(extra) > 0 {
		return nil, &fieldError{location: extra[0], message: fmt.Sprintf("Input schema has more fields than BigQuery schema, extra fields: '%s'", strings.Join(extra, "', '"))}
	}
	return plan, nil
}

func mismatch(path, protoType string, f *bq.TableFieldSchema) *fieldError {
	return &fieldError{location: path, message: fmt.Sprintf("The proto field mismatched with BigQuery field at %s, the proto field type %s, BigQuery field type %s", path, protoType, f.Type)}
}

func kindName(fd protoreflect.FieldDescriptor) string { return fd.Kind().String() }

// wrapperValueField returns the "value" field if md is a protobuf wrapper
// type (google.protobuf.Int64Value and friends), as is or as normalized by
// managedwriter's adapt.NormalizeDescriptor.
func wrapperValueField(md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	name := string(md.Name())
	full := string(md.FullName())
	if !(strings.HasPrefix(full, "google.protobuf.") || strings.HasPrefix(name, "google_protobuf_")) || !strings.HasSuffix(name, "Value") {
		return nil
	}
	if md.Fields().Len() != 1 {
		return nil
	}
	v := md.Fields().ByName("value")
	if v == nil || v.IsList() {
		return nil
	}
	return v
}

func isTimestampMessage(md protoreflect.MessageDescriptor) bool {
	full := string(md.FullName())
	name := string(md.Name())
	return (full == "google.protobuf.Timestamp" || name == "google_protobuf_Timestamp") &&
		md.Fields().ByName("seconds") != nil && md.Fields().ByName("nanos") != nil
}

func isIntKind(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}

// kindCompatible reports whether a proto scalar field may carry a column of
// type typ, following the Storage Write API's type mapping.
func kindCompatible(typ string, fd protoreflect.FieldDescriptor) bool {
	k := fd.Kind()
	switch typ {
	case "STRING", "GEOGRAPHY", "INTERVAL", "RANGE":
		return k == protoreflect.StringKind || k == protoreflect.EnumKind
	case "JSON":
		return k == protoreflect.StringKind
	case "BYTES":
		return k == protoreflect.BytesKind
	case "INTEGER":
		return isIntKind(k) || k == protoreflect.EnumKind
	case "FLOAT":
		return k == protoreflect.DoubleKind || k == protoreflect.FloatKind || isIntKind(k)
	case "BOOLEAN":
		return k == protoreflect.BoolKind
	case "TIMESTAMP":
		return isIntKind(k) || k == protoreflect.StringKind
	case "DATE":
		return isIntKind(k) || k == protoreflect.StringKind
	case "DATETIME", "TIME":
		return isIntKind(k) || k == protoreflect.StringKind
	case "NUMERIC", "BIGNUMERIC":
		return k == protoreflect.StringKind || k == protoreflect.BytesKind || isIntKind(k) ||
			k == protoreflect.DoubleKind || k == protoreflect.FloatKind
	}
	return false
}

const (
	minTimestampMicros = -62135596800000000 // 0001-01-01T00:00:00Z
	maxTimestampMicros = 253402300799999999 // 9999-12-31T23:59:59.999999Z
	minDateDays        = -719162            // 0001-01-01
	maxDateDays        = 2932896            // 9999-12-31
)

// decodeRow converts a decoded proto message into internal values.
func decodeRow(plan []colPlan, msg protoreflect.Message) ([]any, *fieldError) {
	return decodeRowMode(plan, msg, false)
}

// decodeRowMode is decodeRow; with lenient, missing REQUIRED top-level
// columns are not an error (a CDC DELETE needs only the key).
func decodeRowMode(plan []colPlan, msg protoreflect.Message, lenient bool) ([]any, *fieldError) {
	out := make([]any, len(plan))
	for i := range plan {
		p := &plan[i]
		if p.fd == nil {
			if p.field.Mode == "REQUIRED" && !lenient {
				return nil, &fieldError{location: p.path, message: fmt.Sprintf("Missing required field: %s.", p.path)}
			}
			continue
		}
		if p.fd.IsList() {
			l := msg.Get(p.fd).List()
			if l.Len() == 0 {
				continue
			}
			elems := make([]any, 0, l.Len())
			for j := 0; j < l.Len(); j++ {
				v, ferr := p.value(l.Get(j))
				if ferr != nil {
					return nil, ferr
				}
				if v == nil {
					return nil, &fieldError{location: p.path, message: fmt.Sprintf("Repeated field %s contains a NULL element.", p.path)}
				}
				elems = append(elems, v)
			}
			out[i] = elems
			continue
		}
		var pv protoreflect.Value
		switch {
		case msg.Has(p.fd):
			pv = msg.Get(p.fd)
		case p.fd.HasDefault():
			pv = p.fd.Default()
		default:
			if p.field.Mode == "REQUIRED" && !lenient {
				return nil, &fieldError{location: p.path, message: fmt.Sprintf("Missing required field: %s.", p.path)}
			}
			continue
		}
		v, ferr := p.value(pv)
		if ferr != nil {
			return nil, ferr
		}
		if v == nil && p.field.Mode == "REQUIRED" && !lenient {
			return nil, &fieldError{location: p.path, message: fmt.Sprintf("Missing required field: %s.", p.path)}
		}
		out[i] = v
	}
	return out, nil
}

// value converts one proto value of the plan's field.
func (p *colPlan) value(pv protoreflect.Value) (any, *fieldError) {
	fd := p.fd
	if p.wrapper != nil {
		m := pv.Message()
		if !m.IsValid() || !m.Has(p.wrapper) {
			if m.IsValid() {
				return scalarValue(p, p.wrapper, p.wrapper.Default())
			}
			return nil, nil
		}
		return scalarValue(p, p.wrapper, m.Get(p.wrapper))
	}
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		m := pv.Message()
		if p.field.Type == "TIMESTAMP" {
			secs := m.Get(m.Descriptor().Fields().ByName("seconds")).Int()
			nanos := m.Get(m.Descriptor().Fields().ByName("nanos")).Int()
			return checkTimestamp(p, secs*1e6+nanos/1e3)
		}
		return decodeRow(p.sub, m)
	}
	return scalarValue(p, fd, pv)
}

func bad(p *colPlan, format string, args ...any) *fieldError {
	return &fieldError{location: p.path, message: fmt.Sprintf("Invalid value for field %s (type %s): %s", p.path, p.field.Type, fmt.Sprintf(format, args...))}
}

func checkTimestamp(p *colPlan, us int64) (any, *fieldError) {
	if us < minTimestampMicros || us > maxTimestampMicros {
		return nil, bad(p, "timestamp %d micros is out of range", us)
	}
	return us, nil
}

func intOf(fd protoreflect.FieldDescriptor, v protoreflect.Value) (int64, bool) {
	switch fd.Kind() {
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		u := v.Uint()
		if u > math.MaxInt64 {
			return 0, false
		}
		return int64(u), true
	case protoreflect.EnumKind:
		return int64(v.Enum()), true
	}
	return v.Int(), true
}

func scalarValue(p *colPlan, fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, *fieldError) {
	k := fd.Kind()
	switch p.field.Type {
	case "STRING", "GEOGRAPHY", "INTERVAL", "RANGE":
		if k == protoreflect.EnumKind {
			if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
				return string(ev.Name()), nil
			}
			return strconv.Itoa(int(v.Enum())), nil
		}
		return v.String(), nil
	case "JSON":
		s := v.String()
		if !json.Valid([]byte(s)) {
			return nil, bad(p, "invalid JSON %q", truncate(s))
		}
		return s, nil
	case "BYTES":
		return append([]byte(nil), v.Bytes()...), nil
	case "INTEGER":
		i, ok := intOf(fd, v)
		if !ok {
			return nil, bad(p, "integer overflow")
		}
		return i, nil
	case "FLOAT":
		switch k {
		case protoreflect.DoubleKind, protoreflect.FloatKind:
			return v.Float(), nil
		}
		i, ok := intOf(fd, v)
		if !ok {
			return float64(v.Uint()), nil
		}
		return float64(i), nil
	case "BOOLEAN":
		return v.Bool(), nil
	case "TIMESTAMP":
		if k == protoreflect.StringKind {
			us, err := parseTimestamp(v.String())
			if err != nil {
				return nil, bad(p, "cannot parse %q as TIMESTAMP", truncate(v.String()))
			}
			return checkTimestamp(p, us)
		}
		i, ok := intOf(fd, v)
		if !ok {
			return nil, bad(p, "timestamp out of range")
		}
		return checkTimestamp(p, i)
	case "DATE":
		var d int64
		if k == protoreflect.StringKind {
			x, err := parseScalar("DATE", v.String(), false)
			if err != nil {
				return nil, bad(p, "cannot parse %q as DATE", truncate(v.String()))
			}
			d = x.(int64)
		} else {
			var ok bool
			if d, ok = intOf(fd, v); !ok {
				return nil, bad(p, "date out of range")
			}
		}
		if d < minDateDays || d > maxDateDays {
			return nil, bad(p, "date %d days since epoch is out of range", d)
		}
		return d, nil
	case "DATETIME":
		if k == protoreflect.StringKind {
			s, err := parseDateTime(v.String())
			if err != nil {
				return nil, bad(p, "cannot parse %q as DATETIME", truncate(v.String()))
			}
			return s, nil
		}
		i, _ := intOf(fd, v)
		s, err := decodePackedDateTime(i)
		if err != nil {
			return nil, bad(p, "%v", err)
		}
		return s, nil
	case "TIME":
		if k == protoreflect.StringKind {
			s, err := parseTimeOfDay(v.String())
			if err != nil {
				return nil, bad(p, "cannot parse %q as TIME", truncate(v.String()))
			}
			return s, nil
		}
		i, _ := intOf(fd, v)
		s, err := decodePackedTime(i)
		if err != nil {
			return nil, bad(p, "%v", err)
		}
		return s, nil
	case "NUMERIC", "BIGNUMERIC":
		switch k {
		case protoreflect.StringKind:
			x, err := parseScalar(p.field.Type, v.String(), false)
			if err != nil {
				return nil, bad(p, "cannot parse %q as %s", truncate(v.String()), p.field.Type)
			}
			return x, nil
		case protoreflect.BytesKind:
			return decodePackedNumeric(v.Bytes(), p.field.Type), nil
		case protoreflect.DoubleKind, protoreflect.FloatKind:
			f := v.Float()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, bad(p, "%v is not a valid %s", f, p.field.Type)
			}
			return formatDecimal(new(big.Rat).SetFloat64(f), p.field.Type), nil
		}
		i, _ := intOf(fd, v)
		return strconv.FormatInt(i, 10), nil
	}
	return nil, bad(p, "unsupported column type")
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// decodePackedNumeric decodes BigQuery's packed NUMERIC/BIGNUMERIC encoding:
// the little-endian two's complement of the value scaled by 10^9 (NUMERIC)
// or 10^38 (BIGNUMERIC).
func decodePackedNumeric(b []byte, typ string) string {
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	n := new(big.Int).SetBytes(be)
	if len(b) > 0 && b[len(b)-1]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	scale := 9
	if typ == "BIGNUMERIC" {
		scale = 38
	}
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
	return formatDecimal(new(big.Rat).SetFrac(n, den), typ)
}

// decodePackedTime decodes the civil-time bit encoding used for TIME:
// hour(5) minute(6) second(6) micros(20).
func decodePackedTime(v int64) (string, error) {
	us := v & 0xFFFFF
	sec := (v >> 20) & 0x3F
	min := (v >> 26) & 0x3F
	hour := (v >> 32) & 0x1F
	if v>>37 != 0 || hour > 23 || min > 59 || sec > 59 || us > 999999 {
		return "", fmt.Errorf("invalid packed TIME %d", v)
	}
	t := time.Date(2000, 1, 1, int(hour), int(min), int(sec), int(us)*1000, time.UTC)
	s, _ := parseTimeOfDay(t.Format("15:04:05.999999"))
	return s, nil
}

// decodePackedDateTime decodes the civil-time bit encoding used for
// DATETIME: year(14) month(4) day(5) hour(5) minute(6) second(6) micros(20).
func decodePackedDateTime(v int64) (string, error) {
	tod, err := decodePackedTime(v & (1<<37 - 1))
	if err != nil {
		return "", fmt.Errorf("invalid packed DATETIME %d", v)
	}
	day := (v >> 37) & 0x1F
	month := (v >> 42) & 0xF
	year := (v >> 46) & 0x3FFF
	if year < 1 || year > 9999 || month < 1 || month > 12 || day < 1 || day > 31 {
		return "", fmt.Errorf("invalid packed DATETIME %d", v)
	}
	return fmt.Sprintf("%04d-%02d-%02dT%s", year, month, day, tod), nil
}
