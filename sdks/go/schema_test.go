package dbaas

import (
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// The structs are generated from the OpenAPI document (types_gen.go, by sdks/scripts/generate-types.ts;
// `npm run check:sdk` fails when they are stale). This holds the generator to the document: every
// struct's JSON fields against the schemas, recursively, so a field the generator drops or misnames
// fails here. The document comes from $DBAAS_OPENAPI (test/sdks/go.test.ts builds it from the
// gateway's route table and sets it).

var responseTypes = map[string]any{
	"Database": Database{}, "CreatedDatabase": CreatedDatabase{}, "DatabaseListItem": DatabaseListItem{},
	"RestoredFrom": RestoredFrom{}, "RestoredDatabase": RestoredDatabase{}, "Backup": Backup{}, "Metrics": Metrics{},
	"WalArchiving": WalArchiving{}, "DatabaseStatus": DatabaseStatus{}, "ResizedDatabase": ResizedDatabase{},
	"Credentials": Credentials{}, "Operation": Operation{}, "Usage": Usage{}, "PaymentMethod": PaymentMethod{},
	"Invoice": Invoice{}, "Alert": Alert{}, "Organization": Organization{}, "User": User{}, "Member": Member{},
	"Invitation": Invitation{}, "Transfer": Transfer{}, "ApiKey": APIKey{}, "CreatedApiKey": CreatedAPIKey{},
	"Token": Token{}, "Signup": Signup{}, "Acceptance": Acceptance{}, "ListMeta": ListMeta{},
	"Replica": Replica{}, "TrustedSource": TrustedSource{}, "Pooler": Pooler{},
	"HighAvailability": HighAvailability{}, "Role": Role{}, "CreatedRole": CreatedRole{}, "LogicalDb": LogicalDb{},
	"Config": Config{}, "Extension": Extension{},
}

// listedTypes are the item types of the lists that are whole schemas (regions, tiers, versions).
var listedTypes = map[string]any{"Regions": Region{}, "Tiers": Tier{}, "Versions": Version{}}

var requestTypes = map[string]any{
	"signup": SignupRequest{}, "token": LoginRequest{}, "acceptInvitation": AcceptInvitationRequest{},
	"createDatabase": CreateDatabaseRequest{}, "updateDatabase": UpdateDatabaseRequest{},
	"resizeDatabase": ResizeDatabaseRequest{}, "restoreDatabase": RestoreDatabaseRequest{},
	"addPaymentMethod": AddPaymentMethodRequest{}, "updatePaymentMethod": UpdatePaymentMethodRequest{},
	"createAlert": CreateAlertRequest{}, "updateOrganization": UpdateOrganizationRequest{},
	"inviteMember": InviteMemberRequest{}, "updateMember": UpdateMemberRequest{},
	"transferOwnership": TransferOwnershipRequest{}, "createApiKey": CreateAPIKeyRequest{},
	"createReplica": CreateReplicaRequest{}, "createTrustedSource": CreateTrustedSourceRequest{},
	"updatePooler": UpdatePoolerRequest{}, "setHighAvailability": SetHighAvailabilityRequest{},
	"createRole": CreateRoleRequest{}, "createDb": CreateDbRequest{}, "updateConfig": UpdateConfigRequest{},
	"installExtension": InstallExtensionRequest{},
}

// pageTypes are the list answers' data objects.
var pageTypes = map[string]any{
	"listDatabases": DatabasePage{}, "listOperations": OperationPage{}, "listBackups": BackupPage{},
	"listPaymentMethods": PaymentMethodPage{}, "listInvoices": InvoicePage{}, "listAlerts": AlertPage{},
	"listMembers": MemberPage{}, "listInvitations": InvitationPage{}, "listApiKeys": APIKeyPage{},
	"listReplicas": ReplicaPage{}, "listTrustedSources": TrustedSourcePage{},
	"listRoles": RolePage{}, "listDbs": DbPage{}, "listExtensions": ExtensionPage{},
}

type schema = map[string]any

func TestTypesMatchTheOpenAPIDocument(t *testing.T) {
	file := os.Getenv("DBAAS_OPENAPI")
	if file == "" {
		t.Skip("DBAAS_OPENAPI unset: test/sdks/go.test.ts sets it to the document built from the route table")
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc schema
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(schema)["schemas"].(schema)
	resolve := func(s schema) schema {
		if ref, ok := s["$ref"].(string); ok {
			return schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(schema)
		}
		return s
	}
	for name, v := range responseTypes {
		compare(t, name, reflect.TypeOf(v), schemas[name].(schema), resolve)
	}
	for name, v := range listedTypes {
		props := schemas[name].(schema)["properties"].(schema)
		for list, p := range props {
			compare(t, name+"."+list, reflect.TypeOf(v), p.(schema)["items"].(schema), resolve)
		}
	}
	seenRequests, seenPages := 0, 0
	for _, item := range doc["paths"].(schema) {
		for _, op := range item.(schema) {
			o, ok := op.(schema)
			if !ok {
				continue
			}
			id := o["operationId"].(string)
			if body, ok := o["requestBody"].(schema); ok {
				v, known := requestTypes[id]
				if !known {
					t.Errorf("%s takes a body and has no request type", id)
					continue
				}
				seenRequests++
				compare(t, id+" body", reflect.TypeOf(v), body["content"].(schema)["application/json"].(schema)["schema"].(schema), resolve)
			}
			if v, ok := pageTypes[id]; ok {
				seenPages++
				data := dataSchema(o)
				compare(t, id+" data", reflect.TypeOf(v), data, resolve)
			}
		}
	}
	if seenRequests != len(requestTypes) || seenPages != len(pageTypes) {
		t.Errorf("the document has %d of %d request types and %d of %d list answers", seenRequests, len(requestTypes), seenPages, len(pageTypes))
	}
}

// dataSchema is the schema of the data of an operation's success answer.
func dataSchema(op schema) schema {
	for status, res := range op["responses"].(schema) {
		if strings.HasPrefix(status, "2") {
			return res.(schema)["content"].(schema)["application/json"].(schema)["schema"].(schema)["properties"].(schema)["data"].(schema)
		}
	}
	return nil
}

// compare checks that the struct's JSON fields are exactly the schema's properties, and goes into
// the properties that are objects or arrays of objects.
func compare(t *testing.T, where string, typ reflect.Type, s schema, resolve func(schema) schema) {
	t.Helper()
	s = resolve(s)
	props, ok := s["properties"].(schema)
	if !ok {
		return
	}
	fields := jsonFields(typ)
	var missing, extra []string
	for name := range props {
		if _, ok := fields[name]; !ok {
			missing = append(missing, name)
		}
	}
	for name := range fields {
		if _, ok := props[name]; !ok {
			extra = append(extra, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("%s (%s): fields missing %v, not in the document %v", where, typ, missing, extra)
	}
	for name, p := range props {
		ft, ok := fields[name]
		if !ok {
			continue
		}
		ps := resolve(p.(schema))
		if items, ok := ps["items"].(schema); ok && ft.Kind() == reflect.Slice {
			ps, ft = resolve(items), ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Time{}) {
			compare(t, where+"."+name, ft, ps, resolve)
		}
	}
}

// jsonFields maps the JSON names of a struct's fields (embedded structs' included) to their types, pointers removed.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		if f.Anonymous && tag == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if tag == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		out[tag] = ft
	}
	return out
}
