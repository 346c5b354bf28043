// Command operations prints the operationIds dbaas.Operations covers, as a sorted JSON array,
// for the cross-language contract test (test/sdks/contract.test.ts).
package main

import (
	"encoding/json"
	"os"
	"sort"

	dbaas "github.com/dbaas/dbaas-go"
)

func main() {
	ids := make([]string, 0, len(dbaas.Operations))
	for id := range dbaas.Operations {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if err := json.NewEncoder(os.Stdout).Encode(ids); err != nil {
		os.Exit(1)
	}
}
