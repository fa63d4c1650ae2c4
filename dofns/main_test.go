package dofns

import (
	"os"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/internal/loopback"
)

// TestMain runs the package's pipeline tests on prism unless --runner says
// otherwise.
func TestMain(m *testing.M) {
	os.Exit(loopback.Run(func() int { return ptest.MainRetWithDefault(m, "prism") }))
}
