// Command operations prints the operationIds dbaas.Operations covers, as a sorted JSON array, for
// the cross-language contract test (test/sdks/contract.test.ts). With -iterators it prints those of
// dbaas.Iterators whose method returns a *dbaas.Iterator instead.
package main

import (
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"sort"
	"strings"

	dbaas "github.com/dbaas/dbaas-go"
)

func main() {
	iterators := flag.Bool("iterators", false, "print the paged operations walked by an *Iterator")
	flag.Parse()
	methods := dbaas.Operations
	if *iterators {
		methods = dbaas.Iterators
	}
	ids := make([]string, 0, len(methods))
	for id, m := range methods {
		if *iterators && !returnsIterator(m) {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if err := json.NewEncoder(os.Stdout).Encode(ids); err != nil {
		os.Exit(1)
	}
}

// returnsIterator says whether m is a function whose only result is a *dbaas.Iterator[T].
func returnsIterator(m any) bool {
	t := reflect.TypeOf(m)
	if t.Kind() != reflect.Func || t.NumOut() != 1 {
		return false
	}
	out := t.Out(0)
	return out.Kind() == reflect.Pointer && strings.HasPrefix(out.Elem().Name(), "Iterator[")
}
