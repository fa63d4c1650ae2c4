// Package dofnreg registers structural DoFns with Beam: their types, so
// that a job's graph can name them, and a direct caller for their
// ProcessElement, so that no element is called through reflection.
//
// It does what Beam's register.DoFnNxM does, less one thing: the generic
// wrappers for StartBundle and FinishBundle. register.DoFnNxM instantiates
// a wrapper for every arity and parameter tuple those two methods could
// have, thousands of compiled functions per DoFn whatever its methods are,
// so that a package of a dozen DoFns takes minutes of CPU to compile, and
// again for its tests (figures in docs/performance.md, "Compile time").
// Here the bundle and lifecycle methods, which run once per bundle or per
// instance, go through Beam's reflection instead; ProcessElement, which
// runs once per element, keeps its direct caller.
//
// The caller comes from register.FunctionNxM, given the ProcessElement
// method value. That also records the method value by name in Beam's
// function table, where nothing looks it up.
package dofnreg

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// DoFn registers the structural DoFn fn (a pointer to its struct; nil
// will do). caller is Beam's register.FunctionNxM instantiated with
// ProcessElement's parameter and result types, in order, e.g.
//
//	dofnreg.DoFn(&ParseFn{}, register.Function2x0[context.Context, string])
//
// It panics, at init, when those types are not ProcessElement's.
func DoFn[T any, F any](fn *T, caller func(F)) {
	t := reflect.TypeOf(fn)
	m, ok := t.MethodByName("ProcessElement")
	if !ok {
		panic(fmt.Sprintf("dofnreg: %v has no ProcessElement method", t))
	}
	v := reflect.ValueOf(fn).Method(m.Index)
	pe, ok := v.Interface().(F)
	if !ok {
		var want F
		panic(fmt.Sprintf("dofnreg: %v.ProcessElement is %v; its registration says %T", t, v.Type(), want))
	}
	beam.RegisterType(t.Elem())
	caller(pe)
}
