package dofnreg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
)

// countFn has every method kind a DoFn of ours may have: a ProcessElement
// with an emitter, bundle methods that take it too (FinishBundle emits),
// and lifecycle methods.
type countFn struct {
	Prefix string
	n      int
}

func (f *countFn) Setup()                                    {}
func (f *countFn) StartBundle(context.Context, func(string)) { f.n = 0 }
func (f *countFn) ProcessElement(_ context.Context, s string, emit func(string)) {
	f.n++
	emit(f.Prefix + s)
}
func (f *countFn) FinishBundle(emit func(string)) { emit(fmt.Sprintf("%sbundle of %d", f.Prefix, f.n)) }
func (f *countFn) Teardown()                      {}

func init() {
	dofnreg.DoFn(&countFn{}, register.Function3x0[context.Context, string, func(string)])
	register.Emitter1[string]()
}

func TestMain(m *testing.M) { ptest.Main(m) }

// TestProcessElementHasADirectCaller: each element is called through the
// caller Beam's register package generates, not through reflection.
func TestProcessElementHasADirectCaller(t *testing.T) {
	fn, err := graph.NewDoFn(&countFn{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%T", fn.ProcessElementFn().Fn); !strings.Contains(got, "register.caller3x0") {
		t.Errorf("ProcessElement is called through %s; want register's caller3x0", got)
	}
}

// TestRegisteredDoFnRuns: a registered DoFn's every method runs, the
// bundle methods through reflection.
func TestRegisteredDoFnRuns(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, "a")
	out := beam.ParDo(s, &countFn{Prefix: "x-"}, in)
	passert.Equals(s, out, "x-a", "x-bundle of 1")
	ptest.RunAndValidate(t, p)
}

type wrongFn struct{}

func (wrongFn) ProcessElement(string) int { return 0 }

// TestWrongTypesPanicAtRegistration: a registration whose types are not
// ProcessElement's fails at once, naming both.
func TestWrongTypesPanicAtRegistration(t *testing.T) {
	defer func() {
		msg := fmt.Sprint(recover())
		for _, w := range []string{"wrongFn", "func(string) int", "func(string) string"} {
			if !strings.Contains(msg, w) {
				t.Errorf("panic %q does not mention %q", msg, w)
			}
		}
	}()
	dofnreg.DoFn(&wrongFn{}, register.Function1x1[string, string])
}
