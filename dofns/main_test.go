package dofns

import (
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/loopback"
)

// TestMain runs the package's pipeline tests on prism unless --runner says
// otherwise.
func TestMain(m *testing.M) { loopback.TestMain(m) }
