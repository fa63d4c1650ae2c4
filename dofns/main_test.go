package dofns

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
)

// TestMain runs the package's pipeline tests on prism unless --runner says
// otherwise.
func TestMain(m *testing.M) {
	ptest.MainWithDefault(m, "prism")
}
