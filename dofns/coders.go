package dofns

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	// Records cross every GroupByKey. Their compact coder writes only the
	// member each value's kind uses, where Beam's default row coder writes
	// all six members of every value through reflection.
	beam.RegisterCoder(reflect.TypeOf((*schemas.Record)(nil)).Elem(), encodeRecord, schemas.DecodeRecord)
}

func encodeRecord(r schemas.Record) []byte { return r.AppendBinary(nil) }
