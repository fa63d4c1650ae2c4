package cli

import (
	"strings"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// SpecUsage is the help text of --spec, the same in every command
// (launch, query, keys, publish): each registers it as
//
//	fs.StringVar(&spec, "spec", schemas.DefaultSpecName(), cli.SpecUsage)
//
// so that the flag has one name, one meaning and one default, the
// built-in default spec.
var SpecUsage = "Dataset spec: a built-in name (" + strings.Join(schemas.BuiltinSpecNames(), ", ") + ") or a path to a YAML file."
