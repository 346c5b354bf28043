"""``OPERATIONS``: each operationId of the API's OpenAPI document and the ``Client`` method that performs it.

The cross-language contract test (test/sdks/contract.test.ts) compares these keys with the
document the gateway serves, so an operation without a method fails it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .client import Client

OPERATIONS: dict[str, Callable[..., Any]] = {
    # auth, invitations, the document itself
    "signup": Client.signup,
    "token": Client.login,
    "acceptInvitation": Client.accept_invitation,
    "openApi": Client.get_openapi,
    # databases
    "createDatabase": Client.create_database,
    "listDatabases": Client.list_databases,
    "getDatabase": Client.get_database,
    "updateDatabase": Client.update_database,
    "deleteDatabase": Client.delete_database,
    "startDatabase": Client.start_database,
    "stopDatabase": Client.stop_database,
    "restartDatabase": Client.restart_database,
    "resizeDatabase": Client.resize_database,
    "resetPassword": Client.reset_password,
    "listOperations": Client.list_operations,
    "listBackups": Client.list_backups,
    "createBackup": Client.create_backup,
    "restoreDatabase": Client.restore_database,
    "listReplicas": Client.list_replicas,
    "createReplica": Client.create_replica,
    "getReplica": Client.get_replica,
    "deleteReplica": Client.delete_replica,
    "promoteReplica": Client.promote_replica,
    "listTrustedSources": Client.list_trusted_sources,
    "createTrustedSource": Client.add_trusted_source,
    "deleteTrustedSource": Client.remove_trusted_source,
    "getPooler": Client.get_pooler,
    "updatePooler": Client.update_pooler,
    "getHighAvailability": Client.get_high_availability,
    "setHighAvailability": Client.set_high_availability,
    "failover": Client.failover,
    "listRoles": Client.list_roles,
    "createRole": Client.create_role,
    "deleteRole": Client.delete_role,
    "resetRolePassword": Client.reset_role_password,
    "listDbs": Client.list_dbs,
    "createDb": Client.create_db,
    "deleteDb": Client.delete_db,
    "getConfig": Client.get_config,
    "updateConfig": Client.update_config,
    "listExtensions": Client.list_extensions,
    "installExtension": Client.install_extension,
    "deleteExtension": Client.delete_extension,
    "listLogs": Client.list_logs,
    "listQueries": Client.list_queries,
    "resetQueries": Client.reset_queries,
    "getMetrics": Client.get_metrics,
    "getCaCertificate": Client.get_ca_certificate,
    "listRegions": Client.list_regions,
    "listTiers": Client.list_tiers,
    "listVersions": Client.list_versions,
    # billing
    "getUsage": Client.get_usage,
    "listPaymentMethods": Client.list_payment_methods,
    "addPaymentMethod": Client.add_payment_method,
    "updatePaymentMethod": Client.update_payment_method,
    "deletePaymentMethod": Client.delete_payment_method,
    "listInvoices": Client.list_invoices,
    "getInvoicePdf": Client.get_invoice_pdf,
    "createAlert": Client.create_alert,
    "listAlerts": Client.list_alerts,
    "deleteAlert": Client.delete_alert,
    # organization, members, invitations, API keys
    "getOrganization": Client.get_organization,
    "updateOrganization": Client.update_organization,
    "deleteOrganization": Client.delete_organization,
    "listMembers": Client.list_members,
    "inviteMember": Client.invite_member,
    "updateMember": Client.update_member,
    "removeMember": Client.remove_member,
    "listInvitations": Client.list_invitations,
    "cancelInvitation": Client.cancel_invitation,
    "transferOwnership": Client.transfer_ownership,
    "listApiKeys": Client.list_api_keys,
    "createApiKey": Client.create_api_key,
    "revokeApiKey": Client.revoke_api_key,
}

#: Every paged operation (one taking a ``page`` query parameter) and the ``iter_*`` method that walks
#: all of its pages; the contract test checks the keys against the document and that each method
#: returns an iterator.
ITERATORS: dict[str, Callable[..., Iterator[dict[str, Any]]]] = {
    "listDatabases": Client.iter_databases,
    "listOperations": Client.iter_operations,
    "listBackups": Client.iter_backups,
    "listReplicas": Client.iter_replicas,
    "listTrustedSources": Client.iter_trusted_sources,
    "listRoles": Client.iter_roles,
    "listDbs": Client.iter_dbs,
    "listExtensions": Client.iter_extensions,
    "listPaymentMethods": Client.iter_payment_methods,
    "listInvoices": Client.iter_invoices,
    "listAlerts": Client.iter_alerts,
    "listMembers": Client.iter_members,
    "listInvitations": Client.iter_invitations,
    "listApiKeys": Client.iter_api_keys,
}
