package dbaas

import (
	"context"
	"reflect"
	"testing"
)

// TestEveryOperationIsIdiomatic holds every method of Operations and Iterators to the client's
// conventions: the receiver, then a context.Context; an operation returns (T, error) or only an
// error, an iterator only its *Iterator (whose Err reports the failure).
func TestEveryOperationIsIdiomatic(t *testing.T) {
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	errType := reflect.TypeOf((*error)(nil)).Elem()
	check := func(id string, m any, results func(reflect.Type) bool) {
		ft := reflect.TypeOf(m)
		if ft.Kind() != reflect.Func || ft.NumIn() < 2 || ft.In(0) != reflect.TypeOf(&Client{}) || ft.In(1) != ctxType {
			t.Errorf("%s: %v does not take (*Client, context.Context, …)", id, ft)
			return
		}
		if !results(ft) {
			t.Errorf("%s: %v returns neither (T, error) nor error as it should", id, ft)
		}
	}
	if len(Operations) == 0 || len(Iterators) == 0 {
		t.Fatal("no operations to check")
	}
	for id, m := range Operations {
		check(id, m, func(ft reflect.Type) bool {
			n := ft.NumOut()
			return (n == 1 || n == 2) && ft.Out(n-1) == errType
		})
	}
	for id, m := range Iterators {
		check(id, m, func(ft reflect.Type) bool {
			return ft.NumOut() == 1 && ft.Out(0).Kind() == reflect.Pointer && ft.Out(0).Elem().Name() != "" &&
				reflect.PointerTo(ft.Out(0).Elem()).Implements(reflect.TypeOf((*interface{ Err() error })(nil)).Elem())
		})
	}
}
