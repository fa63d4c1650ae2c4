package codec

import (
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
	"github.com/valyala/fastjson"
)

// timestamp reads a timestamp field's value: text in the field's layout
// (read in its timezone) when it declares one, else as timestampValue
// does.
func (p *Parser) timestamp(v *fastjson.Value, f *schemas.FieldSpec) (int64, error) {
	if f.Layout == "" || v.Type() != fastjson.TypeString {
		return timestampValue(v, f.Unit)
	}
	b, _ := v.StringBytes()
	return timestamps.ParseLayout(string(b), f.Layout, f.Timezone)
}
