package dofns

import (
	"os"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/internal/loopback"
)

// TestMain runs the package's pipeline tests on prism unless --runner says
// otherwise.
func TestMain(m *testing.M) {
	start := time.Now()
	code := ptest.MainRetWithDefault(m, "prism")
	loopback.Sweep(start)
	os.Exit(code)
}
