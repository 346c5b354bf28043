package dbaas

// Operations maps every operationId of the API's OpenAPI document to the method that performs it
// (a method expression, so a renamed or missing method fails to compile). The contract test
// (test/sdks/contract.test.ts) compares its keys, printed by ./internal/cmd/operations, with the document.
var Operations = map[string]any{
	"signup":           (*Client).Signup,
	"token":            (*Client).Login,
	"acceptInvitation": (*Client).AcceptInvitation,
	"openApi":          (*Client).OpenAPI,

	"createDatabase":   (*Client).CreateDatabase,
	"listDatabases":    (*Client).ListDatabases,
	"getDatabase":      (*Client).GetDatabase,
	"updateDatabase":   (*Client).UpdateDatabase,
	"deleteDatabase":   (*Client).DeleteDatabase,
	"startDatabase":    (*Client).StartDatabase,
	"stopDatabase":     (*Client).StopDatabase,
	"restartDatabase":  (*Client).RestartDatabase,
	"resizeDatabase":   (*Client).ResizeDatabase,
	"resetPassword":    (*Client).ResetPassword,
	"listOperations":   (*Client).ListOperations,
	"listBackups":      (*Client).ListBackups,
	"createBackup":     (*Client).CreateBackup,
	"restoreDatabase":  (*Client).RestoreDatabase,
	"listReplicas":     (*Client).ListReplicas,
	"createReplica":    (*Client).CreateReplica,
	"getReplica":       (*Client).GetReplica,
	"deleteReplica":    (*Client).DeleteReplica,
	"promoteReplica":   (*Client).PromoteReplica,
	"getMetrics":       (*Client).GetMetrics,
	"getCaCertificate": (*Client).GetCACertificate,
	"listRegions":      (*Client).ListRegions,
	"listTiers":        (*Client).ListTiers,
	"listVersions":     (*Client).ListVersions,

	"getUsage":            (*Client).GetUsage,
	"listPaymentMethods":  (*Client).ListPaymentMethods,
	"addPaymentMethod":    (*Client).AddPaymentMethod,
	"updatePaymentMethod": (*Client).UpdatePaymentMethod,
	"deletePaymentMethod": (*Client).DeletePaymentMethod,
	"listInvoices":        (*Client).ListInvoices,
	"getInvoicePdf":       (*Client).GetInvoicePDF,
	"createAlert":         (*Client).CreateAlert,
	"listAlerts":          (*Client).ListAlerts,
	"deleteAlert":         (*Client).DeleteAlert,

	"getOrganization":    (*Client).GetOrganization,
	"updateOrganization": (*Client).UpdateOrganization,
	"deleteOrganization": (*Client).DeleteOrganization,
	"listMembers":        (*Client).ListMembers,
	"inviteMember":       (*Client).InviteMember,
	"updateMember":       (*Client).UpdateMember,
	"removeMember":       (*Client).RemoveMember,
	"listInvitations":    (*Client).ListInvitations,
	"cancelInvitation":   (*Client).CancelInvitation,
	"transferOwnership":  (*Client).TransferOwnership,
	"listApiKeys":        (*Client).ListAPIKeys,
	"createApiKey":       (*Client).CreateAPIKey,
	"revokeApiKey":       (*Client).RevokeAPIKey,
}

// Iterators maps every paged operation (one taking a page query parameter) to the method that walks
// all of its pages, returning an *Iterator; the contract test checks its keys against the document
// and the methods' result types (./internal/cmd/operations -iterators).
var Iterators = map[string]any{
	"listDatabases":      (*Client).AllDatabases,
	"listOperations":     (*Client).AllOperations,
	"listBackups":        (*Client).AllBackups,
	"listReplicas":       (*Client).AllReplicas,
	"listPaymentMethods": (*Client).AllPaymentMethods,
	"listInvoices":       (*Client).AllInvoices,
	"listAlerts":         (*Client).AllAlerts,
	"listMembers":        (*Client).AllMembers,
	"listInvitations":    (*Client).AllInvitations,
	"listApiKeys":        (*Client).AllAPIKeys,
}
