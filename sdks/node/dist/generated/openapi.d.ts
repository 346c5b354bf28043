export interface paths {
    "/v1/auth/signup": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Create a user and an organization (plan free) owned by it; returns a token. */
        post: operations["signup"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/auth/token": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Log in with e-mail and password. */
        post: operations["token"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/invitations/accept": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Accept an invitation with its one-time token: join (creating the user if new) and get a token. */
        post: operations["acceptInvitation"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This API's OpenAPI 3.1 description, generated from this table. */
        get: operations["openApi"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the organization's databases. */
        get: operations["listDatabases"];
        put?: never;
        /** Create a database; the response carries its password, shown this once. */
        post: operations["createDatabase"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a database (the connection string's password masked). */
        get: operations["getDatabase"];
        put?: never;
        post?: never;
        /** Delete a database (data retained 7 days). */
        delete: operations["deleteDatabase"];
        options?: never;
        head?: never;
        /** Rename a database. */
        patch: operations["updateDatabase"];
        trace?: never;
    };
    "/v1/databases/{id}/start": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Start a stopped database. */
        post: operations["startDatabase"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/stop": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Stop a running database (compute billing stops). */
        post: operations["stopDatabase"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/restart": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Restart a running database. */
        post: operations["restartDatabase"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/resize": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Move a database to another tier. */
        post: operations["resizeDatabase"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/reset-password": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Replace the password; the old one stops working at once. */
        post: operations["resetPassword"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/operations": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the operations run on a database. */
        get: operations["listOperations"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/backups": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List a database's base backups, newest first, with its restore window and the state of WAL archiving. */
        get: operations["listBackups"];
        put?: never;
        /** Take a base backup now (202, status running); one at a time, of a running database (409 otherwise). */
        post: operations["createBackup"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/restore": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Restore to a point in time as a NEW database (own id, host, certificate and password, shown this once): exactly the transactions committed up to restore_time. Counts against the free allowance like a create. */
        post: operations["restoreDatabase"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/replicas": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List a database's read replicas, oldest first, each with its replication lag. */
        get: operations["listReplicas"];
        put?: never;
        /** Create a read replica: a hot standby streaming from the database over TLS, seeded from a base backup (status `provisioning`), reachable with the database's own username and password. At most 5 per database, of a running database (409 otherwise); billed per hour at the replica tier's price, so a payment method is needed (402). */
        post: operations["createReplica"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/replicas/{rid}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a read replica (the connection string's password masked: the database's password works). */
        get: operations["getReplica"];
        put?: never;
        post?: never;
        /** Delete a read replica: its instance and data go at once (nothing to restore: it is a copy). */
        delete: operations["deleteReplica"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/replicas/{rid}/promote": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Promote a running replica (409 otherwise) to an independent, writable database: a new `db-` id, the replica's name, tier and region, the primary's credentials (no password in this answer). The replica is gone. It counts against the free allowance like a create (402 beyond it without a payment method in good standing). */
        post: operations["promoteReplica"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/trusted-sources": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the addresses allowed to connect to the database (its port, its pooler and its replicas), oldest first. An empty list admits every address. */
        get: operations["listTrustedSources"];
        put?: never;
        /** Allow an IPv4 or IPv6 address or network (CIDR) to connect. Once a database has trusted sources, connections from any other address are refused before they reach PostgreSQL, within 5 seconds. With `expires_at` the entry stops admitting at that instant and leaves the list. At most 50 per database (409); a CIDR with host bits set is a 422 naming the network meant; one already listed is a 409. */
        post: operations["createTrustedSource"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/trusted-sources/{tsid}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Remove a trusted source: its address stops being admitted within 5 seconds (unless another entry covers it). */
        delete: operations["deleteTrustedSource"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/pooler": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The database's connection pooler (PgBouncer): its own host name and port, the database's username and password. `enabled: false` with a `reason` where the database's host cannot run one. */
        get: operations["getPooler"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /** Change the pooler: enable or disable it, its mode (`transaction`, the default, or `session`) and its pool size (1 … the tier's max_connections − 5; 422 naming the field otherwise). 409 when its host cannot run a pooler. */
        patch: operations["updatePooler"];
        trace?: never;
    };
    "/v1/databases/{id}/high-availability": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A database's high availability: its standbys and mode, its members (the primary first) and its last failover. */
        get: operations["getHighAvailability"];
        /** Set a database's standbys (0, 1 or 2) and synchronous mode. Each standby runs on another host of the region (409 naming the reason when the region has too few), streams from the primary, is promoted automatically when the primary is lost, and is billed as compute at the database's tier (402 without a payment method in good standing). Adding standbys needs a running database (409 otherwise); `synchronous` needs at least one (422). */
        put: operations["setHighAvailability"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/failover": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** A planned switchover (for maintenance): the primary stops taking writes, the healthiest standby receives all of its WAL and is promoted; the connection string stays the same. 202 with the operation (`failover`, running); 409 without a healthy standby, when the database is not running, or while a switchover is under way. */
        post: operations["failover"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/roles": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the database's roles (dbadmin included, and roles made in SQL), by name; never a password. */
        get: operations["listRoles"];
        put?: never;
        /** Create a LOGIN role (never superuser, replication or bypassrls) with a generated password, shown this once. dbadmin may grant it privileges, alter or drop it. At most 50 roles per database (409 beyond); a taken name is 409. */
        post: operations["createRole"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/roles/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Drop a role and end its sessions. dbadmin cannot be deleted; a role that still owns objects or holds privileges is 409 saying in which databases (REASSIGN OWNED / DROP OWNED there first). */
        delete: operations["deleteRole"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/roles/{name}/reset-password": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Give a role a new password (shown this once): when the answer arrives the old one no longer works and the role's open sessions, on the read replicas too, have ended. For dbadmin this is the database's reset-password. */
        post: operations["resetRolePassword"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/dbs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the server's logical databases (defaultdb included), by name, with owner and size. */
        get: operations["listDbs"];
        put?: never;
        /** Create a logical database owned by a role (default dbadmin); at most 50; a taken name is 409. */
        post: operations["createDb"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/dbs/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Drop a logical database; defaultdb cannot be deleted, nor one with open connections (409 saying how many). */
        delete: operations["deleteDb"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/config": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The database's configuration: every parameter that can be changed, with its value, default (the tier's, else PostgreSQL's), unit, type, bounds on the database's tier, and whether a restart applies it or is awaited. */
        get: operations["getConfig"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /** Change parameters of the allowlist, all or nothing (422 naming each refused one). A running database answers once its server has them (a new session sees them); restart-only ones show pending_restart until a restart. Kept across restart, resize (a tier they do not fit is refused) and restore. */
        patch: operations["updateConfig"];
        trace?: never;
    };
    "/v1/databases/{id}/extensions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the extensions the server's binaries offer (pg_available_extensions), with versions, whether the logical database (`db`, default defaultdb) has each, whether it is trusted, and whether it can be installed here (`allowed`). */
        get: operations["listExtensions"];
        put?: never;
        /** Install an extension of the allowlist (pg_stat_statements, pgcrypto, pg_trgm, citext, hstore, uuid-ossp, btree_gin, btree_gist, …) as superuser in a logical database (default defaultdb); any other (an untrusted language, one reaching outside the server) is 422. Installing one already installed changes nothing. */
        post: operations["installExtension"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/extensions/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Drop an extension from a logical database (`db`, default defaultdb); 409 while objects depend on it, 404 when not installed. */
        delete: operations["deleteExtension"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/logs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The server's log (jsonlog), newest last: without a cursor the newest `limit` entries matching the filters (`since`, `until`, `severity` and worse, `q` in the text); `next_cursor` gives what was written after them (poll it to tail), `prev_cursor` the entries before. Kept 7 days or the tier's log quota; never a password. Any status. */
        get: operations["listLogs"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/queries": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Query insights from pg_stat_statements: the statements of your roles in normalized text (constants as $1), ordered by total_time, mean_time or calls (descending), with calls, times, rows and cache hit ratio. While running (409 otherwise). */
        get: operations["listQueries"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/queries/reset": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Start the query statistics again from nothing (pg_stat_statements_reset). While running (409 otherwise). A change: databases:write, where reading them is metrics:read. */
        post: operations["resetQueries"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A database's metrics over [start, end] (default: the last hour) at `step` seconds (default 60): one point per bucket with data. 1-minute points are kept 7 days, hourly ones 30 days. */
        get: operations["getMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/databases/{id}/ca-certificate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The CA certificate that signs the database's server certificate (PEM). */
        get: operations["getCaCertificate"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/regions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Regions a database can be created in. */
        get: operations["listRegions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tiers": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Instance tiers and their hourly prices (USD). */
        get: operations["listTiers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/versions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** PostgreSQL versions a database can run. */
        get: operations["listVersions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/billing/usage": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Month-to-date usage and its price. */
        get: operations["getUsage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/billing/payment-methods": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the organization's payment methods, oldest first. */
        get: operations["listPaymentMethods"];
        put?: never;
        /** Add a card from a payment processor token; the organization's first payment method becomes its default. */
        post: operations["addPaymentMethod"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/billing/payment-methods/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Remove a payment method; the processor lets go of the card. The default only when it is the last one and nothing needs it (409 while another method exists, a database beyond the free allowance runs, or the plan is paid). */
        delete: operations["deletePaymentMethod"];
        options?: never;
        head?: never;
        /** Make a payment method the default (the previous default stops being it). */
        patch: operations["updatePaymentMethod"];
        trace?: never;
    };
    "/v1/billing/invoices": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the organization's invoices, newest period first: one per calendar month (UTC) with usage, issued after it ended. */
        get: operations["listInvoices"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/billing/invoices/{id}/pdf": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** An invoice as a PDF document. */
        get: operations["getInvoicePdf"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/billing/alerts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the organization's spending alerts, oldest first. */
        get: operations["listAlerts"];
        put?: never;
        /** Set a spending alert: once per calendar month (UTC), when the month-to-date total reaches the threshold, the organization is told through the channels. */
        post: operations["createAlert"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/billing/alerts/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Remove a spending alert; it never fires again. */
        delete: operations["deleteAlert"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/organization": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The caller's organization: id, name, plan. */
        get: operations["getOrganization"];
        put?: never;
        post?: never;
        /** Delete the organization, its members, invitations and API keys; only without live databases. */
        delete: operations["deleteOrganization"];
        options?: never;
        head?: never;
        /** Rename the organization; changing the plan also needs billing:write. */
        patch: operations["updateOrganization"];
        trace?: never;
    };
    "/v1/organization/members": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the organization's members. */
        get: operations["listMembers"];
        put?: never;
        /** Invite someone by e-mail; returns the pending invitation (valid 7 days). */
        post: operations["inviteMember"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/organization/members/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Remove a member: their sessions end at once; API keys they created stay until revoked. */
        delete: operations["removeMember"];
        options?: never;
        head?: never;
        /** Change a member's role (never the owner's, never to owner). */
        patch: operations["updateMember"];
        trace?: never;
    };
    "/v1/organization/invitations": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List invitations not yet accepted or cancelled (status pending or expired). */
        get: operations["listInvitations"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/organization/invitations/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Cancel an invitation; its link stops working. */
        delete: operations["cancelInvitation"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/organization/transfer": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Owner only: make another member owner (the caller becomes admin); needs the caller's password. */
        post: operations["transferOwnership"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/organization/api-keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List API keys (never their secrets): the caller's own; every key of the organization for owner and admin (settings:write). */
        get: operations["listApiKeys"];
        put?: never;
        /** Create an API key (any member), its scopes capped by the calling credential and the creator's role; the secret is in this response only. */
        post: operations["createApiKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/organization/api-keys/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Revoke an API key at once: one's own, or anyone's for owner and admin (settings:write). */
        delete: operations["revokeApiKey"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        Meta: {
            /** @description Same as the X-Request-Id header. */
            request_id: string;
        };
        ListMeta: {
            request_id: string;
            page: number;
            per_page: number;
            /** @description Items across all pages. */
            total: number;
            /** @description `ceil(total / per_page)`; 0 for an empty list. */
            total_pages: number;
        };
        Error: {
            error: {
                /** @enum {string} */
                code: "validation_error" | "invalid_token" | "insufficient_permissions" | "payment_required" | "resource_not_found" | "resource_conflict" | "method_not_allowed" | "payload_too_large" | "request_timeout" | "request_header_too_large" | "rate_limit_exceeded" | "maintenance_mode" | "service_unavailable" | "upstream_timeout" | "internal_error";
                /** @description For people; never internal hosts or stack traces. */
                message: string;
                /** @description One entry per invalid field (validation_error); empty otherwise. */
                details: {
                    field: string;
                    message: string;
                }[];
            };
            meta: components["schemas"]["Meta"];
        };
        /** @description A database as GET and PATCH return it: the connection string's password masked. */
        Database: {
            /** @description Identifier, prefix `db-`. */
            id: string;
            /** @description 3-63 characters. */
            name: string;
            /** @constant */
            type: "postgres";
            /**
             * @description Region code.
             * @enum {string}
             */
            region: "fsn1" | "nbg1" | "hel1";
            /**
             * @description Instance tier.
             * @enum {string}
             */
            tier: "micro" | "small" | "medium" | "large" | "xlarge";
            /** @description PostgreSQL major version. */
            version: string;
            /**
             * @description Lifecycle status.
             * @enum {string}
             */
            status: "provisioning" | "running" | "starting" | "stopping" | "stopped" | "restarting" | "resizing" | "failed";
            /** @description Why the database is `failed`; absent otherwise. */
            status_reason?: string;
            /** @description `<id>.<database domain>`. */
            host: string;
            port: number;
            database: string;
            username: string;
            /** @description `postgresql://<username>:********@<host>:<port>/<database>?sslmode=require`. */
            connection_string: string;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            updated_at: string;
            /** @description Set on a database made by `POST /v1/databases/{id}/restore`; absent otherwise. */
            restored_from?: components["schemas"]["RestoredFrom"];
        };
        /** @description A new database, with its password: shown this once. */
        CreatedDatabase: {
            /** @description Identifier, prefix `db-`. */
            id: string;
            name: string;
            /** @constant */
            type: "postgres";
            /**
             * @description Region code.
             * @enum {string}
             */
            region: "fsn1" | "nbg1" | "hel1";
            /**
             * @description Instance tier.
             * @enum {string}
             */
            tier: "micro" | "small" | "medium" | "large" | "xlarge";
            /** @description PostgreSQL major version. */
            version: string;
            /**
             * @description Lifecycle status.
             * @enum {string}
             */
            status: "provisioning" | "running" | "starting" | "stopping" | "stopped" | "restarting" | "resizing" | "failed";
            host: string;
            port: number;
            database: string;
            username: string;
            password: string;
            /** @description With the password in clear. */
            connection_string: string;
            /** Format: date-time */
            created_at: string;
        };
        /** @description A database as lists show it: exactly these fields. */
        DatabaseListItem: {
            /** @description Identifier, prefix `db-`. */
            id: string;
            name: string;
            /**
             * @description Region code.
             * @enum {string}
             */
            region: "fsn1" | "nbg1" | "hel1";
            /**
             * @description Instance tier.
             * @enum {string}
             */
            tier: "micro" | "small" | "medium" | "large" | "xlarge";
            /** @description PostgreSQL major version. */
            version: string;
            /**
             * @description Lifecycle status.
             * @enum {string}
             */
            status: "provisioning" | "running" | "starting" | "stopping" | "stopped" | "restarting" | "resizing" | "failed";
            /** Format: date-time */
            created_at: string;
        };
        /** @description The database and the instant a restored database was made from. */
        RestoredFrom: {
            /** @description Identifier, prefix `db-`. */
            database_id: string;
            /**
             * Format: date-time
             * @description It holds exactly the transactions committed up to this instant.
             */
            restore_time: string;
        };
        /** @description A new database restored from another's backups, with its password: shown this once. */
        RestoredDatabase: {
            /** @description Identifier, prefix `db-`. */
            id: string;
            name: string;
            /** @constant */
            type: "postgres";
            /**
             * @description Region code.
             * @enum {string}
             */
            region: "fsn1" | "nbg1" | "hel1";
            /**
             * @description Instance tier.
             * @enum {string}
             */
            tier: "micro" | "small" | "medium" | "large" | "xlarge";
            /** @description PostgreSQL major version. */
            version: string;
            /**
             * @description Lifecycle status.
             * @enum {string}
             */
            status: "provisioning" | "running" | "starting" | "stopping" | "stopped" | "restarting" | "resizing" | "failed";
            host: string;
            port: number;
            database: string;
            username: string;
            password: string;
            /** @description With the password in clear. */
            connection_string: string;
            /** Format: date-time */
            created_at: string;
            restored_from: components["schemas"]["RestoredFrom"];
        };
        /** @description A base backup of a database. */
        Backup: {
            /** @description Identifier, prefix `bkp-`. */
            id: string;
            /**
             * @description `scheduled`: daily (and the first, when the database first ran); `manual`: asked for.
             * @enum {string}
             */
            type: "scheduled" | "manual";
            /**
             * @description `completed`: stored with the WAL it needs, usable for a restore.
             * @enum {string}
             */
            status: "running" | "completed" | "failed";
            /** Format: date-time */
            started_at: string;
            /**
             * Format: date-time
             * @description When it completed or failed; null while running.
             */
            completed_at: string | null;
            /**
             * Format: int64
             * @description Compressed bytes stored; 0 until completed.
             */
            size_bytes: number;
            /** @description Why it failed; null otherwise. */
            failure_reason: string | null;
        };
        /**
         * @description An address range allowed to connect to a database, its pooler and its replicas.
         * @example {
         *       "id": "ts-4b8r2k9q",
         *       "cidr": "203.0.113.0/24",
         *       "description": "office",
         *       "expires_at": null,
         *       "created_at": "2026-01-05T10:00:00Z"
         *     }
         */
        TrustedSource: {
            /** @description Identifier, prefix `ts-`. */
            id: string;
            /** @description IPv4 or IPv6 network in CIDR form, normalized (`203.0.113.0/24`, `198.51.100.7/32`, `2001:db8::/32`). */
            cidr: string;
            /** @description What the entry is for; empty when none was given. */
            description: string;
            /**
             * Format: date-time
             * @description When the entry stops admitting and leaves the list; null: never.
             */
            expires_at: string | null;
            /** Format: date-time */
            created_at: string;
        };
        /**
         * @description A database's connection pooler (PgBouncer) with its own host name and port; the database's username and password log in.
         * @example {
         *       "enabled": true,
         *       "mode": "transaction",
         *       "pool_size": 20,
         *       "max_client_connections": 1000,
         *       "host": "db-3f9a1c2e-pooler.db.example.com",
         *       "port": 16400,
         *       "connection_string": "postgresql://dbadmin:********@db-3f9a1c2e-pooler.db.example.com:16400/defaultdb?sslmode=require"
         *     }
         */
        Pooler: {
            /** @description Whether the pooler runs (false where its host cannot run one: see `reason`). */
            enabled: boolean;
            /**
             * @description Pool mode: `transaction` (default) or `session`.
             * @enum {string}
             */
            mode: "transaction" | "session";
            /** @description Server connections per database and user. */
            pool_size: number;
            /** @description Client connections the pooler accepts at once. */
            max_client_connections: number;
            /** @description `<database id>-pooler.<database domain>`: its certificate's name (sslmode=verify-full with the CA certificate). */
            host?: string;
            port?: number;
            /** @description `postgresql://<username>:********@<host>:<port>/<database>?sslmode=require`. */
            connection_string?: string;
            /** @description Why there is no pooler; absent when there can be one. */
            reason?: string;
        };
        /**
         * @description A read replica of a database: a hot standby streaming from it, read-only, reached with the database's own username and password.
         * @example {
         *       "id": "rep-8k2m4q7x",
         *       "name": "reports",
         *       "database_id": "db-3f9a1c2e",
         *       "region": "fsn1",
         *       "tier": "micro",
         *       "status": "running",
         *       "host": "rep-8k2m4q7x.db.example.com",
         *       "port": 5432,
         *       "database": "defaultdb",
         *       "username": "dbadmin",
         *       "connection_string": "postgresql://dbadmin:********@rep-8k2m4q7x.db.example.com:5432/defaultdb?sslmode=require",
         *       "lag_bytes": 0,
         *       "created_at": "2026-01-05T10:00:00Z"
         *     }
         */
        Replica: {
            /** @description Identifier, prefix `rep-`. */
            id: string;
            /** @description 3-63 characters. */
            name: string;
            /** @description The primary: the database the replica follows. */
            database_id: string;
            /**
             * @description Region code.
             * @enum {string}
             */
            region: "fsn1" | "nbg1" | "hel1";
            /**
             * @description Instance tier.
             * @enum {string}
             */
            tier: "micro" | "small" | "medium" | "large" | "xlarge";
            /**
             * @description Lifecycle status; it follows the primary's stops and starts.
             * @enum {string}
             */
            status: "provisioning" | "running" | "starting" | "stopping" | "stopped" | "failed";
            /** @description Why the replica is `failed`; absent otherwise. */
            status_reason?: string;
            /** @description `<id>.<database domain>`. */
            host: string;
            port: number;
            /** @description The primary's database. */
            database: string;
            /** @description The primary's username; its password works here too. */
            username: string;
            /** @description `postgresql://<username>:********@<host>:<port>/<database>?sslmode=require`. */
            connection_string: string;
            /**
             * Format: int64
             * @description Bytes of WAL not yet replayed, as last measured; 0 until measured.
             */
            lag_bytes: number;
            /** Format: date-time */
            created_at: string;
        };
        /** @description A database's metrics. */
        Metrics: {
            /** Format: date-time */
            start: string;
            /** Format: date-time */
            end: string;
            /** @description Seconds between points. */
            step: number;
            metrics: components["schemas"]["Metric"][];
        };
        /** @description One metric: its series, one per label set. */
        Metric: {
            /** @description cpu_percent, memory_bytes, storage_bytes, connections, transactions_per_second, rows_per_second, cache_hit_ratio, deadlocks, network_bytes_per_second, replication_lag_bytes or wal_archive_lag_seconds. */
            name: string;
            unit: string;
            series: components["schemas"]["MetricSeries"][];
        };
        /** @description The points of one label set; a bucket without samples has no point. */
        MetricSeries: {
            /** @description `state` (connections): active, idle, idle_in_transaction; `op` (rows_per_second): fetched, inserted, updated, deleted; `direction` (network_bytes_per_second): in, out; `replica` (replication_lag_bytes): the replica's id. */
            labels: {
                [key: string]: string;
            };
            points: [number, number][];
        };
        /** @description Whether the database's WAL reaches the backup store: what keeps the restore window moving. */
        WalArchiving: {
            /** @enum {string} */
            status: "healthy" | "failing";
            /** @description Why archiving is failing (store unreachable, spool full); null while healthy. */
            error: string | null;
        };
        /** @description The database's status after start, stop or restart was accepted. */
        DatabaseStatus: {
            /** @description Identifier, prefix `db-`. */
            id: string;
            /**
             * @description Lifecycle status.
             * @enum {string}
             */
            status: "provisioning" | "running" | "starting" | "stopping" | "stopped" | "restarting" | "resizing" | "failed";
        };
        /** @description The database's new tier and status after a resize was accepted. */
        ResizedDatabase: {
            /** @description Identifier, prefix `db-`. */
            id: string;
            /**
             * @description Instance tier.
             * @enum {string}
             */
            tier: "micro" | "small" | "medium" | "large" | "xlarge";
            /**
             * @description Lifecycle status.
             * @enum {string}
             */
            status: "provisioning" | "running" | "starting" | "stopping" | "stopped" | "restarting" | "resizing" | "failed";
        };
        /** @description New credentials; the previous password no longer works. */
        Credentials: {
            password: string;
            /** @description With the password in clear. */
            connection_string: string;
        };
        /** @description One operation run on a database. */
        Operation: {
            /** @description Identifier, prefix `op-`. */
            id: string;
            /**
             * @description `restore`: a deleted database brought back, or a database made from another's backups; `promote`: the database a promoted read replica became; `backup`: a base backup; `wal_archive`: WAL archiving started failing (failed, with why) or resumed (succeeded); `storage_full`: the database reached its tier's storage and was made read-only (a session may still `SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE` to delete data); `storage_ok`: below 95 % again, writable; `failover`: a standby promoted, automatically or by a planned switchover (succeeded once it runs as the primary); `standby_replaced`: a standby whose host was not heard from for too long retired, and a replacement placed on another host (at once, or once one can take it).
             * @enum {string}
             */
            type: "create" | "start" | "stop" | "restart" | "resize" | "delete" | "restore" | "promote" | "backup" | "wal_archive" | "storage_full" | "storage_ok" | "failover" | "standby_replaced";
            /** @enum {string} */
            status: "running" | "succeeded" | "failed";
            /** Format: date-time */
            started_at: string;
            /**
             * Format: date-time
             * @description Null while running.
             */
            finished_at: string | null;
            /** @description Why it failed; null otherwise. */
            error: string | null;
            /** @description A `failover`'s and a `standby_replaced`'s only: why it happened (the lost lease, the failed server or a planned switchover; the standby's silent host) and what became of the old primary's data (where the replacement went). */
            reason?: string;
            /** @description A `failover`'s: the member that was the primary (`node-…`); a `standby_replaced`'s: the standby retired. */
            from?: string;
            /** @description A `failover`'s: the standby promoted (`node-…`), the primary from then on; a `standby_replaced`'s: its replacement, once placed (absent until then). */
            to?: string;
        };
        /**
         * @description A database's high availability: its standbys (streaming replicas on other hosts of its region, promoted automatically when the primary is lost) and their mode, its members now, and its last failover.
         * @example {
         *       "standbys": 1,
         *       "synchronous": true,
         *       "members": [
         *         {
         *           "id": "node-2k7x9m4q1a8c3e5f",
         *           "role": "primary",
         *           "status": "running",
         *           "region": "fsn1",
         *           "lag_bytes": 0
         *         },
         *         {
         *           "id": "node-8h3j5n2p7r4t6v1w",
         *           "role": "standby",
         *           "status": "running",
         *           "region": "fsn1",
         *           "lag_bytes": 0
         *         }
         *       ],
         *       "last_failover": {
         *         "at": "2026-01-05T10:00:12Z",
         *         "reason": "agent-fsn1 stopped renewing the primary's lease (it ended 2026-01-05T10:00:00.000Z); promoted the standby with the most WAL (50331648 bytes, synchronous mode)",
         *         "from": "node-5d1f7g3h9k2m4n6p",
         *         "to": "node-2k7x9m4q1a8c3e5f"
         *       }
         *     }
         */
        HighAvailability: {
            /** @description Standbys kept. */
            standbys: number;
            /** @description Whether a commit returns only once a standby has its WAL (no acknowledged commit lost on failover). */
            synchronous: boolean;
            members: {
                /** @description Identifier, prefix `node-`. */
                id: string;
                /**
                 * @description The primary takes the connections; a standby streams from it and is not reachable by clients.
                 * @enum {string}
                 */
                role: "primary" | "standby";
                /**
                 * @description Lifecycle status.
                 * @enum {string}
                 */
                status: "provisioning" | "running" | "starting" | "stopping" | "stopped" | "restarting" | "resizing" | "failed";
                /**
                 * @description Region code.
                 * @enum {string}
                 */
                region: "fsn1" | "nbg1" | "hel1";
                /**
                 * Format: int64
                 * @description A standby's WAL not yet replayed, as last measured; 0 for the primary.
                 */
                lag_bytes: number;
            }[];
            /**
             * LastFailover
             * @description The last failover or switchover; null before the first.
             */
            last_failover: {
                /** Format: date-time */
                at: string;
                /** @description Why it happened. */
                reason: string;
                /** @description The member that was the primary. */
                from: string;
                /** @description The standby promoted. */
                to: string;
            } | null;
        };
        /** @description Regions a database can be created in. */
        Regions: {
            regions: {
                /**
                 * @description Region code.
                 * @enum {string}
                 */
                code: "fsn1" | "nbg1" | "hel1";
                /** @description Location. */
                name: string;
            }[];
        };
        /** @description Instance tiers. */
        Tiers: {
            tiers: {
                /**
                 * @description Instance tier.
                 * @enum {string}
                 */
                name: "micro" | "small" | "medium" | "large" | "xlarge";
                vcpu: number;
                memory_gb: number;
                storage_gb: number;
                /** @description USD per hour while running. */
                hourly_price: number;
            }[];
        };
        /** @description PostgreSQL versions. */
        Versions: {
            versions: {
                /** @description PostgreSQL major version. */
                version: string;
                default: boolean;
            }[];
        };
        /** @description Month-to-date usage of the organization and its price. */
        Usage: {
            /** @description The billing period, half-open. */
            period: {
                /** Format: date-time */
                start: string;
                /**
                 * Format: date-time
                 * @description First instant of the next month.
                 */
                end: string;
            };
            /** @description Quantities and amounts per meter. */
            usage: {
                /**
                 * UsageHours
                 * @description Running time.
                 */
                compute: {
                    hours: number;
                    amount: number;
                };
                /**
                 * UsageGB
                 * @description Stored data.
                 */
                storage: {
                    /** @description GB-months. */
                    gb: number;
                    amount: number;
                };
                /**
                 * UsageGB
                 * @description Data transferred.
                 */
                data_transfer: {
                    gb: number;
                    amount: number;
                };
                /**
                 * UsageHours
                 * @description Replica running time.
                 */
                replicas: {
                    hours: number;
                    amount: number;
                };
            };
            total: number;
            /** @description Three-letter currency code. */
            currency: string;
        };
        /** @description A payment method: what the payment processor reports about the card it holds, never its number. */
        PaymentMethod: {
            /** @description Identifier, prefix `pm-`. */
            id: string;
            /** @enum {string} */
            type: "card";
            /** @description Lowercase card brand as the processor names it (`visa`, `mastercard`, …). */
            brand: string;
            /** @description Last four digits of the card number. */
            last4: string;
            exp_month: number;
            exp_year: number;
            /** @description Whether invoices are charged to it; an organization has at most one default. */
            default: boolean;
            /** Format: date-time */
            created_at: string;
        };
        /** @description The bill of one calendar month (UTC), issued after the month ended and charged to the default payment method. */
        Invoice: {
            /** @description Identifier, prefix `inv-`. */
            id: string;
            /** @description The month billed, `YYYY-MM`. */
            period: string;
            /** @description Sum of the lines' amounts. */
            amount: number;
            /** @description Three-letter currency code. */
            currency: string;
            /**
             * @description `open`: issued, the charge not made yet or being retried; `paid`; `past_due`: the charge was declined or there was no payment method.
             * @enum {string}
             */
            status: "open" | "paid" | "past_due";
            /** Format: date-time */
            issued_at: string;
            /**
             * Format: date-time
             * @description The charge is attempted when the invoice is issued: the same instant.
             */
            due_at: string;
            /**
             * Format: date-time
             * @description Null until paid.
             */
            paid_at: string | null;
            /**
             * Format: uri
             * @description The invoice as a PDF (GET with the same credential).
             */
            pdf_url: string;
            lines: {
                /** @description What was used, e.g. `Compute, small`. */
                description: string;
                quantity: number;
                /** @enum {string} */
                unit: "hour" | "GB-month" | "GB";
                /** @description Rounded to cents. */
                amount: number;
            }[];
        };
        /** @description A spending alert: fires at most once per calendar month (UTC). */
        Alert: {
            /** @description Identifier, prefix `alr-`. */
            id: string;
            /** @description Month-to-date total, in `currency`, at which the alert fires. */
            threshold: number;
            /** @description Three-letter currency code. */
            currency: string;
            channels: "email"[];
            /** Format: date-time */
            created_at: string;
        };
        /** @description An organization. */
        Organization: {
            /** @description Identifier, prefix `org-`. */
            id: string;
            name: string;
            /**
             * @description Rate limits follow the plan.
             * @enum {string}
             */
            plan: "free" | "pro" | "enterprise" | "internal";
            /** Format: date-time */
            created_at: string;
        };
        /** @description A user. */
        User: {
            /** @description Identifier, prefix `user-`. */
            id: string;
            email: string;
            name: string;
        };
        /** @description A member of the organization. */
        Member: {
            /** @description Identifier, prefix `member-`. */
            id: string;
            user: components["schemas"]["User"];
            /** @enum {string} */
            role: "owner" | "admin" | "developer" | "viewer";
            /** Format: date-time */
            joined_at: string;
        };
        /** @description An invitation. */
        Invitation: {
            /** @description Identifier, prefix `invite-`. */
            id: string;
            email: string;
            /** @enum {string} */
            role: "owner" | "admin" | "developer" | "viewer";
            /** @enum {string} */
            status: "pending" | "expired";
            /** Format: date-time */
            expires_at: string;
            /** Format: date-time */
            created_at: string;
        };
        /** @description Both member records after an ownership transfer. */
        Transfer: {
            owner: components["schemas"]["Member"];
            previous_owner: components["schemas"]["Member"];
        };
        /** @description An API key (never its secret). */
        ApiKey: {
            /** @description Identifier, prefix `key-`. */
            id: string;
            name: string;
            scopes: ("databases:read" | "databases:write" | "backups:write" | "metrics:read" | "members:read" | "members:write" | "settings:write" | "billing:read" | "billing:write" | "organization:delete")[];
            /** @description First characters of the secret, to recognise it. */
            prefix: string;
            /**
             * @description The creator's role when the key was created; the key keeps it.
             * @enum {string}
             */
            role: "owner" | "admin" | "developer" | "viewer";
            /** @description User id of the creator. */
            created_by: string;
            /** Format: date-time */
            created_at: string;
            /**
             * Format: date-time
             * @description Null: never expires.
             */
            expires_at: string | null;
        };
        /** @description A new API key with its secret, shown this once. */
        CreatedApiKey: {
            /** @description Identifier, prefix `key-`. */
            id: string;
            name: string;
            scopes: ("databases:read" | "databases:write" | "backups:write" | "metrics:read" | "members:read" | "members:write" | "settings:write" | "billing:read" | "billing:write" | "organization:delete")[];
            /** @description First characters of the secret, to recognise it. */
            prefix: string;
            /**
             * @description The creator's role when the key was created; the key keeps it.
             * @enum {string}
             */
            role: "owner" | "admin" | "developer" | "viewer";
            /** @description User id of the creator. */
            created_by: string;
            /** Format: date-time */
            created_at: string;
            /**
             * Format: date-time
             * @description Null: never expires.
             */
            expires_at: string | null;
            /** @description The key itself, for `Authorization: Bearer`. */
            secret: string;
        };
        /** @description A login token. */
        Token: {
            /** @description Bearer credential for the Authorization header. */
            access_token: string;
            /** @constant */
            token_type: "Bearer";
            /**
             * Format: date-time
             * @description When the token stops working (1 hour after issue).
             */
            expires_at: string;
        };
        /** @description The new user, their organization and a login token. */
        Signup: {
            user: components["schemas"]["User"];
            organization: components["schemas"]["Organization"];
            /** @description Bearer credential for the Authorization header. */
            access_token: string;
            /** @constant */
            token_type: "Bearer";
            /**
             * Format: date-time
             * @description When the token stops working (1 hour after issue).
             */
            expires_at: string;
        };
        /** @description The organization joined, the new membership and a login token acting in it. */
        Acceptance: {
            organization: components["schemas"]["Organization"];
            member: components["schemas"]["Member"];
            /** @description Bearer credential for the Authorization header. */
            access_token: string;
            /** @constant */
            token_type: "Bearer";
            /**
             * Format: date-time
             * @description When the token stops working (1 hour after issue).
             */
            expires_at: string;
        };
        /** @description A role of the database: never superuser, replication or bypassrls; never a password. */
        Role: {
            /** @description A plain identifier. */
            name: string;
            /** @description Whether it may log in (roles made through the API always may). */
            login: boolean;
            create_db: boolean;
            create_role: boolean;
            /** @description The database's own role (`dbadmin`): it cannot be deleted. */
            builtin: boolean;
            /**
             * Format: date-time
             * @description When it was made through the API; null for dbadmin and roles made in SQL.
             */
            created_at: string | null;
        };
        /** @description A role with its password: shown this once (a reset-password gives a new one). */
        CreatedRole: {
            /** @description A plain identifier. */
            name: string;
            /** @description Whether it may log in (roles made through the API always may). */
            login: boolean;
            create_db: boolean;
            create_role: boolean;
            /** @description The database's own role (`dbadmin`): it cannot be deleted. */
            builtin: boolean;
            /**
             * Format: date-time
             * @description When it was made through the API; null for dbadmin and roles made in SQL.
             */
            created_at: string | null;
            password: string;
            /** @description To defaultdb as this role, with the password in clear. */
            connection_string: string;
        };
        /** @description A logical database of the server (not `postgres`, not the templates). */
        LogicalDb: {
            /** @description A plain identifier. */
            name: string;
            /** @description The role that owns it. */
            owner: string;
            /**
             * Format: int64
             * @description Its size on disk (pg_database_size).
             */
            size_bytes: number;
            /** @description The database every server has (`defaultdb`): it cannot be deleted. */
            builtin: boolean;
        };
        /** @description An extension the server's binaries offer, and whether a logical database has it. */
        Extension: {
            name: string;
            /** @description The version an install gets. */
            default_version: string;
            /** @description The version installed in the logical database asked about; null when it is not. */
            installed_version: string | null;
            installed: boolean;
            /** @description PostgreSQL's trusted flag: a database owner could install it without a superuser. */
            trusted: boolean;
            /** @description Whether POST …/extensions installs it (the allowlist); others are refused. */
            allowed: boolean;
            description: string;
        };
        /** @description A database's configuration: every parameter that can be changed. */
        Config: {
            parameters: {
                /** @description PostgreSQL's name of the parameter. */
                name: string;
                /** @description What the database runs with (or will at its next restart): the override, else the default. */
                value: number | string | boolean | string[];
                /** @description Its value without an override: the tier's, else PostgreSQL's. */
                default: number | string | boolean | string[];
                /** @description `kB`, `ms` or `s`: the unit of a number (a string value may name another: `64MB`, `30s`); null for others. */
                unit: string | null;
                /** @enum {string} */
                type: "integer" | "real" | "bool" | "enum" | "string" | "list";
                /** @description The least value on the database's tier; null when unbounded or not a number. */
                min: number | null;
                /** @description The greatest value on the database's tier; null when unbounded or not a number. */
                max: number | null;
                /** @description An enum's values, a list's possible members; null for others. */
                allowed: string[] | null;
                /** @description Only a restart applies a change. */
                requires_restart: boolean;
                /** @description Changed, waiting for the next restart to take effect. */
                pending_restart: boolean;
                /** @description Set by you (PATCH it to null for the default). */
                overridden: boolean;
                description: string;
            }[];
        };
        /** @description A page of the server's log, oldest first (newest last). */
        LogPage: {
            entries: {
                /** Format: date-time */
                time: string;
                /** @description PostgreSQL's: DEBUG1…5, INFO, LOG, NOTICE, WARNING, ERROR, FATAL or PANIC. */
                severity: string;
                message: string;
                /** @description PostgreSQL's DETAIL; null when none. */
                detail: string | null;
                /** @description PostgreSQL's HINT; null when none. */
                hint: string | null;
                /** @description Where it happened (a function, a COPY line); null when none. */
                context: string | null;
                /** @description The statement that failed (ERROR and worse); null when none. */
                statement: string | null;
                /** @description SQLSTATE (e.g. 42P01: undefined table); null for 00000. */
                sql_state: string | null;
                /** @description The role of the session; null for background processes. */
                user: string | null;
                /** @description The logical database of the session; null for background processes. */
                database: string | null;
                /** @description The session's application_name; null when none. */
                application_name: string | null;
                /** @description The process: client backend, checkpointer, autovacuum worker, … */
                backend_type: string;
                /** @description The server process. */
                pid: number;
            }[];
            /** @description Pass as `cursor` for the entries written after these (what a tail polls with). */
            next_cursor: string;
            /** @description Pass as `cursor` for the entries before these; null at the beginning of the log. */
            prev_cursor: string | null;
        };
        /** @description Query insights from pg_stat_statements: the customer's roles' statements, normalized. */
        QueryPage: {
            queries: {
                /** @description pg_stat_statements' queryid (a 64-bit integer, as a string). */
                query_id: string;
                /** @description Normalized text: constants as $1, $2, … */
                query: string;
                /**
                 * Format: int64
                 * @description Times it ran.
                 */
                calls: number;
                /** @description Planning and execution, in milliseconds, over all calls. */
                total_time_ms: number;
                mean_time_ms: number;
                /** @description Fastest execution. */
                min_time_ms: number;
                /** @description Slowest execution. */
                max_time_ms: number;
                /**
                 * Format: int64
                 * @description Rows returned or affected, over all calls.
                 */
                rows: number;
                /** @description Shared blocks found in the buffer cache / blocks needed; null when it read none. */
                cache_hit_ratio: number | null;
                user: string;
                /** @description Null when the logical database was dropped. */
                database: string | null;
            }[];
            /**
             * Format: date-time
             * @description Since when the statistics count (the last reset).
             */
            stats_reset: string | null;
        };
        /** @description An OpenAPI 3.1 document. */
        OpenApiDocument: {
            openapi: string;
            info: Record<string, never>;
            paths: Record<string, never>;
        };
    };
    responses: {
        /** @description Malformed request: unparseable JSON, wrong content type, a query value of the wrong type, a malformed Idempotency-Key or path. */
        BadRequest: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "validation_error";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description Missing, malformed, unknown, expired or revoked credential (or, on log-in routes, a wrong password). */
        Unauthorized: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                "WWW-Authenticate": components["headers"]["WwwAuthenticate"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "invalid_token";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description The organization must add a payment method first. */
        PaymentRequired: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "payment_required";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description The credential lacks the permission the action requires. */
        Forbidden: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "insufficient_permissions";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description No such resource in the caller's organization. */
        NotFound: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "resource_not_found";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description Conflict with the resource's current state, or a request with the same Idempotency-Key still running. */
        Conflict: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                "Retry-After": components["headers"]["RetryAfterOptional"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "resource_conflict";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description Request body over 1 MB. */
        PayloadTooLarge: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "payload_too_large";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description Well-formed request that failed validation; `details` names each field. Also an Idempotency-Key reused for a different request. */
        UnprocessableEntity: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "validation_error";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description Rate limit exceeded; the X-RateLimit-* headers describe the exhausted window. */
        TooManyRequests: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                "Retry-After": components["headers"]["RetryAfter"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "rate_limit_exceeded";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description Internal error; the message is generic. */
        InternalError: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "internal_error";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description Maintenance (`maintenance_mode`) or an internal service unavailable (`service_unavailable`). */
        ServiceUnavailable: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                "Retry-After": components["headers"]["RetryAfter"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "maintenance_mode" | "service_unavailable";
                    };
                } & components["schemas"]["Error"];
            };
        };
        /** @description An internal service did not answer in time. */
        GatewayTimeout: {
            headers: {
                "X-Request-Id": components["headers"]["RequestId"];
                "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": {
                    error?: {
                        /** @enum {string} */
                        code?: "upstream_timeout";
                    };
                } & components["schemas"]["Error"];
            };
        };
    };
    parameters: {
        /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
        RequestId: string;
        /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
        IdempotencyKey: string;
    };
    requestBodies: never;
    headers: {
        /** @description The request's id, also in `meta.request_id`: a sane client `X-Request-Id`, or a new one (`req_…`). */
        RequestId: string;
        /** @description Requests allowed in the window closest to exhaustion. */
        RateLimitLimit: number;
        /** @description Requests left in that window. */
        RateLimitRemaining: number;
        /** @description When that window resets, Unix time in seconds. */
        RateLimitReset: number;
        /** @description Seconds to wait before retrying. */
        RetryAfter: number;
        /** @description Seconds to wait before retrying; set when a request with the same Idempotency-Key is still running. */
        RetryAfterOptional: number;
        /** @description `Bearer` challenge (RFC 6750). */
        WwwAuthenticate: string;
        /** @description `true` when this is the stored response of an earlier request with the same Idempotency-Key. */
        IdempotentReplayed: "true";
        /** @description Suggested file name. */
        ContentDisposition: string;
    };
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    signup: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description E-mail address; becomes the login. */
                    email: string;
                    /** @description Password of the new user. */
                    password: string;
                    /** @description Display name of the user. 1–100 characters after trimming. */
                    name: string;
                    /** @description Name of the organization created with the user (plan free). 1–100 characters after trimming. */
                    organization_name: string;
                };
            };
        };
        responses: {
            /** @description Create a user and an organization (plan free) owned by it; returns a token. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Signup"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    token: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description E-mail address of the user. */
                    email: string;
                    /** @description The user's password. */
                    password: string;
                    /** @description Organization the token acts in; default: the user's oldest membership. */
                    organization_id?: string;
                };
            };
        };
        responses: {
            /** @description Log in with e-mail and password. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Token"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    acceptInvitation: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The one-time token from the invitation link. */
                    token: string;
                    /** @description Display name of a new user (then required); ignored when the e-mail already has an account. 1–100 characters after trimming. */
                    name?: string;
                    /** @description Password of the new user, or the existing account's password. */
                    password: string;
                };
            };
        };
        responses: {
            /** @description Accept an invitation with its one-time token: join (creating the user if new) and get a token. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Acceptance"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    openApi: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description This API's OpenAPI 3.1 description, generated from this table. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OpenApiDocument"];
                };
            };
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    listDatabases: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
                /** @description Only databases in this status. */
                status?: "provisioning" | "running" | "starting" | "stopping" | "stopped" | "restarting" | "resizing" | "failed";
                /** @description Only databases in this region. */
                region?: "fsn1" | "nbg1" | "hel1";
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List the organization's databases. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            databases: components["schemas"]["DatabaseListItem"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    createDatabase: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description Name of the database. 3–63 characters after trimming, unique among the organization's live databases. */
                    name: string;
                    /**
                     * @description Region code (GET /v1/regions).
                     * @enum {string}
                     */
                    region: "fsn1" | "nbg1" | "hel1";
                    /**
                     * @description Instance tier (GET /v1/tiers).
                     * @enum {string}
                     */
                    tier: "micro" | "small" | "medium" | "large" | "xlarge";
                    /**
                     * @description PostgreSQL major version (GET /v1/versions lists those with capacity); default 17.
                     * @enum {string}
                     */
                    version?: "17" | "16";
                    /** @description Standbys on other hosts of the region (high availability; GET …/high-availability), default 0; 409 when the region has too few hosts, 402 without a payment method in good standing. */
                    standbys?: number;
                    /** @description Commit only once a standby has the WAL (needs standbys ≥ 1), default false. */
                    synchronous?: boolean;
                };
            };
        };
        responses: {
            /** @description Create a database; the response carries its password, shown this once. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["CreatedDatabase"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            402: components["responses"]["PaymentRequired"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    getDatabase: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Get a database (the connection string's password masked). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Database"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    deleteDatabase: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    updateDatabase: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": {
                    /** @description New name. 3–63 characters after trimming, unique among the organization's live databases. */
                    name?: string;
                };
            };
        };
        responses: {
            /** @description Rename a database. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Database"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    startDatabase: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Start a stopped database. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["DatabaseStatus"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            402: components["responses"]["PaymentRequired"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    stopDatabase: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Stop a running database (compute billing stops). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["DatabaseStatus"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    restartDatabase: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Restart a running database. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["DatabaseStatus"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    resizeDatabase: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /**
                     * @description The new instance tier (GET /v1/tiers).
                     * @enum {string}
                     */
                    tier: "micro" | "small" | "medium" | "large" | "xlarge";
                };
            };
        };
        responses: {
            /** @description Move a database to another tier. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["ResizedDatabase"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            402: components["responses"]["PaymentRequired"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    resetPassword: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Replace the password; the old one stops working at once. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Credentials"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listOperations: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List the operations run on a database. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            operations: components["schemas"]["Operation"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listBackups: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List a database's base backups, newest first, with its restore window and the state of WAL archiving. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            backups: components["schemas"]["Backup"][];
                            /**
                             * Format: date-time
                             * @description The earliest instant a restore can reach; null until a backup completed.
                             */
                            earliest_restore_time: string | null;
                            /**
                             * Format: date-time
                             * @description The latest instant a restore can reach (within 90 s of now while archiving is healthy).
                             */
                            latest_restore_time: string | null;
                            wal_archiving: components["schemas"]["WalArchiving"];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    createBackup: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Take a base backup now (202, status running); one at a time, of a running database (409 otherwise). */
            202: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Backup"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    restoreDatabase: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description Name of the new database. 3–63 characters after trimming, unique among the organization's live databases. */
                    name: string;
                    /**
                     * Format: date-time
                     * @description The instant to restore to (RFC 3339), within the window `GET /v1/databases/{id}/backups` shows; default: the latest restorable instant.
                     */
                    restore_time?: string;
                    /**
                     * @description Instance tier of the new database; default: the source's (GET /v1/tiers).
                     * @enum {string}
                     */
                    tier?: "micro" | "small" | "medium" | "large" | "xlarge";
                    /**
                     * @description Region of the new database; default: the source's (GET /v1/regions).
                     * @enum {string}
                     */
                    region?: "fsn1" | "nbg1" | "hel1";
                };
            };
        };
        responses: {
            /** @description Restore to a point in time as a NEW database (own id, host, certificate and password, shown this once): exactly the transactions committed up to restore_time. Counts against the free allowance like a create. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["RestoredDatabase"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            402: components["responses"]["PaymentRequired"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listReplicas: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List a database's read replicas, oldest first, each with its replication lag. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            replicas: components["schemas"]["Replica"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    createReplica: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description Name of the replica: the rules of a database's name, 3–63 characters after trimming, unique among the primary's live replicas. */
                    name: string;
                    /**
                     * @description Instance tier of the replica; default: the primary's (GET /v1/tiers).
                     * @enum {string}
                     */
                    tier?: "micro" | "small" | "medium" | "large" | "xlarge";
                    /**
                     * @description Region of the replica; default: the primary's (GET /v1/regions).
                     * @enum {string}
                     */
                    region?: "fsn1" | "nbg1" | "hel1";
                };
            };
        };
        responses: {
            /** @description Create a read replica: a hot standby streaming from the database over TLS, seeded from a base backup (status `provisioning`), reachable with the database's own username and password. At most 5 per database, of a running database (409 otherwise); billed per hour at the replica tier's price, so a payment method is needed (402). */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Replica"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            402: components["responses"]["PaymentRequired"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    getReplica: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
                /** @description The replica's id (`rep-…`). */
                rid: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Get a read replica (the connection string's password masked: the database's password works). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Replica"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    deleteReplica: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
                /** @description The replica's id (`rep-…`). */
                rid: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    promoteReplica: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
                /** @description The replica's id (`rep-…`). */
                rid: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Promote a running replica (409 otherwise) to an independent, writable database: a new `db-` id, the replica's name, tier and region, the primary's credentials (no password in this answer). The replica is gone. It counts against the free allowance like a create (402 beyond it without a payment method in good standing). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Database"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            402: components["responses"]["PaymentRequired"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listTrustedSources: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List the addresses allowed to connect to the database (its port, its pooler and its replicas), oldest first. An empty list admits every address. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            trusted_sources: components["schemas"]["TrustedSource"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    createTrustedSource: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description An IPv4 or IPv6 address (admitted alone: /32, /128) or network in CIDR form, e.g. `203.0.113.0/24` or `2001:db8::/32`. Stored in network form; host bits set (`10.1.2.3/8`) are a 422 suggesting the network (`10.0.0.0/8`). */
                    cidr: string;
                    /** @description What the entry is for (at most 255 characters), e.g. `office` or `CI runner`. */
                    description?: string;
                    /**
                     * Format: date-time
                     * @description When the entry stops admitting and leaves the list (in the future); default: never.
                     */
                    expires_at?: string;
                };
            };
        };
        responses: {
            /** @description Allow an IPv4 or IPv6 address or network (CIDR) to connect. Once a database has trusted sources, connections from any other address are refused before they reach PostgreSQL, within 5 seconds. With `expires_at` the entry stops admitting at that instant and leaves the list. At most 50 per database (409); a CIDR with host bits set is a 422 naming the network meant; one already listed is a 409. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["TrustedSource"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    deleteTrustedSource: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
                /** @description The trusted source's id (`ts-…`). */
                tsid: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    getPooler: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The database's connection pooler (PgBouncer): its own host name and port, the database's username and password. `enabled: false` with a `reason` where the database's host cannot run one. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Pooler"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    updatePooler: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": {
                    /** @description false stops the pooler (its port refuses connections); true starts it again. */
                    enabled?: boolean;
                    /**
                     * @description `transaction` (default): a server connection per transaction, so SET, LISTEN, advisory locks held across transactions and protocol-level prepared statements do not carry over; `session`: one per client connection.
                     * @enum {string}
                     */
                    mode?: "transaction" | "session";
                    /** @description Server connections per database and user: 1 … the tier's max_connections − 5. */
                    pool_size?: number;
                };
            };
        };
        responses: {
            /** @description Change the pooler: enable or disable it, its mode (`transaction`, the default, or `session`) and its pool size (1 … the tier's max_connections − 5; 422 naming the field otherwise). 409 when its host cannot run a pooler. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Pooler"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    getHighAvailability: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A database's high availability: its standbys and mode, its members (the primary first) and its last failover. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["HighAvailability"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    setHighAvailability: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description Standbys to keep: 0, 1 or 2, each a streaming replica on another host of the database's region at its port, not reachable by clients, billed as compute at the database's tier. */
                    standbys: number;
                    /** @description true: a commit returns only once a standby has its WAL, so a failover loses no acknowledged commit (needs at least 1 standby). */
                    synchronous: boolean;
                };
            };
        };
        responses: {
            /** @description Set a database's standbys (0, 1 or 2) and synchronous mode. Each standby runs on another host of the region (409 naming the reason when the region has too few), streams from the primary, is promoted automatically when the primary is lost, and is billed as compute at the database's tier (402 without a payment method in good standing). Adding standbys needs a running database (409 otherwise); `synchronous` needs at least one (422). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["HighAvailability"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            402: components["responses"]["PaymentRequired"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    failover: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A planned switchover (for maintenance): the primary stops taking writes, the healthiest standby receives all of its WAL and is promoted; the connection string stays the same. 202 with the operation (`failover`, running); 409 without a healthy standby, when the database is not running, or while a switchover is under way. */
            202: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Operation"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listRoles: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List the database's roles (dbadmin included, and roles made in SQL), by name; never a password. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            roles: components["schemas"]["Role"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    createRole: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The role's name. A plain identifier: a lowercase letter or _, then lowercase letters, digits or _ (at most 63); not pg_… or dbaas_…. */
                    name: string;
                };
            };
        };
        responses: {
            /** @description Create a LOGIN role (never superuser, replication or bypassrls) with a generated password, shown this once. dbadmin may grant it privileges, alter or drop it. At most 50 roles per database (409 beyond); a taken name is 409. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["CreatedRole"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    deleteRole: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
                /** @description The role's name. */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    resetRolePassword: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
                /** @description The role's name. */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Give a role a new password (shown this once): when the answer arrives the old one no longer works and the role's open sessions, on the read replicas too, have ended. For dbadmin this is the database's reset-password. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["CreatedRole"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listDbs: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List the server's logical databases (defaultdb included), by name, with owner and size. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            dbs: components["schemas"]["LogicalDb"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    createDb: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The database's name. A plain identifier: a lowercase letter or _, then lowercase letters, digits or _ (at most 63); not pg_… or dbaas_…. */
                    name: string;
                    /** @description The role that owns it; default dbadmin. A plain identifier: a lowercase letter or _, then lowercase letters, digits or _ (at most 63); not pg_… or dbaas_…. */
                    owner?: string;
                };
            };
        };
        responses: {
            /** @description Create a logical database owned by a role (default dbadmin); at most 50; a taken name is 409. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["LogicalDb"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    deleteDb: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
                /** @description The logical database's name. */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    getConfig: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The database's configuration: every parameter that can be changed, with its value, default (the tier's, else PostgreSQL's), unit, type, bounds on the database's tier, and whether a restart applies it or is awaited. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Config"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    updateConfig: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description Parameter name → its new value (a number in its unit, a string with a unit such as `64MB` or `30s`, a boolean, a list), or null for its default. All or nothing: one refused parameter refuses the change. */
                    parameters: {
                        [key: string]: number | string | boolean | null | string[];
                    };
                };
            };
        };
        responses: {
            /** @description Change parameters of the allowlist, all or nothing (422 naming each refused one). A running database answers once its server has them (a new session sees them); restart-only ones show pending_restart until a restart. Kept across restart, resize (a tier they do not fit is refused) and restore. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Config"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listExtensions: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
                /** @description The logical database; default defaultdb. A plain identifier: a lowercase letter or _, then lowercase letters, digits or _ (at most 63); not pg_… or dbaas_…. */
                db?: string;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List the extensions the server's binaries offer (pg_available_extensions), with versions, whether the logical database (`db`, default defaultdb) has each, whether it is trusted, and whether it can be installed here (`allowed`). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            extensions: components["schemas"]["Extension"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    installExtension: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The extension (GET …/extensions marks those that can be installed: `allowed`). */
                    name: string;
                    /** @description The logical database; default defaultdb. A plain identifier: a lowercase letter or _, then lowercase letters, digits or _ (at most 63); not pg_… or dbaas_…. */
                    db?: string;
                };
            };
        };
        responses: {
            /** @description Install an extension of the allowlist (pg_stat_statements, pgcrypto, pg_trgm, citext, hstore, uuid-ossp, btree_gin, btree_gist, …) as superuser in a logical database (default defaultdb); any other (an untrusted language, one reaching outside the server) is 422. Installing one already installed changes nothing. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Extension"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    deleteExtension: {
        parameters: {
            query?: {
                /** @description The logical database; default defaultdb. A plain identifier: a lowercase letter or _, then lowercase letters, digits or _ (at most 63); not pg_… or dbaas_…. */
                db?: string;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
                /** @description The extension's name. */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listLogs: {
        parameters: {
            query?: {
                /** @description Entries at or after this instant (RFC 3339). */
                since?: string;
                /** @description Entries before this instant (RFC 3339). */
                until?: string;
                /** @description The least severe level returned: ERROR returns ERROR, FATAL and PANIC. */
                severity?: "DEBUG" | "INFO" | "LOG" | "NOTICE" | "WARNING" | "ERROR" | "FATAL" | "PANIC" | "debug" | "info" | "log" | "notice" | "warning" | "error" | "fatal" | "panic";
                /** @description Text in the message, detail, hint or statement (any case). */
                q?: string;
                /** @description At most this many entries (default 100). */
                limit?: number;
                /** @description `next_cursor` (entries after) or `prev_cursor` (entries before) of an earlier page. */
                cursor?: string;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The server's log (jsonlog), newest last: without a cursor the newest `limit` entries matching the filters (`since`, `until`, `severity` and worse, `q` in the text); `next_cursor` gives what was written after them (poll it to tail), `prev_cursor` the entries before. Kept 7 days or the tier's log quota; never a password. Any status. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["LogPage"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listQueries: {
        parameters: {
            query?: {
                /** @description Descending; default total_time. */
                order_by?: "total_time" | "mean_time" | "calls";
                /** @description At most this many statements (default 20). */
                limit?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Query insights from pg_stat_statements: the statements of your roles in normalized text (constants as $1), ordered by total_time, mean_time or calls (descending), with calls, times, rows and cache hit ratio. While running (409 otherwise). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["QueryPage"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    resetQueries: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    getMetrics: {
        parameters: {
            query?: {
                /** @description Start of the range (ISO 8601); default: an hour before end. */
                start?: string;
                /** @description End of the range (ISO 8601); default: now. */
                end?: string;
                /** @description Seconds between points (at least 60, default 60); at most 1,000 points per series. */
                step?: number;
                /** @description Comma-separated metric names; default: every metric. An unknown name is refused, listing the known ones. */
                names?: string;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A database's metrics over [start, end] (default: the last hour) at `step` seconds (default 60): one point per bucket with data. 1-minute points are kept 7 days, hourly ones 30 days. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Metrics"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    getCaCertificate: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The database's id (`db-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The CA certificate that signs the database's server certificate (PEM). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Content-Disposition": components["headers"]["ContentDisposition"];
                    [name: string]: unknown;
                };
                content: {
                    "application/x-pem-file": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listRegions: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Regions a database can be created in. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Regions"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listTiers: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Instance tiers and their hourly prices (USD). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Tiers"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listVersions: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description PostgreSQL versions a database can run. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Versions"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    getUsage: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Month-to-date usage and its price. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Usage"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listPaymentMethods: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List the organization's payment methods, oldest first. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            payment_methods: components["schemas"]["PaymentMethod"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    addPaymentMethod: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /**
                     * @description Kind of payment method.
                     * @enum {string}
                     */
                    type: "card";
                    /** @description A payment token from the payment processor's client-side SDK; the card number never reaches us. */
                    token: string;
                };
            };
        };
        responses: {
            /** @description Add a card from a payment processor token; the organization's first payment method becomes its default. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["PaymentMethod"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    deletePaymentMethod: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The payment method's id (`pm-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    updatePaymentMethod: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The payment method's id (`pm-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": {
                    /** @description true makes this the default payment method, the one invoices are charged to; the previous default stops being it. */
                    default?: boolean;
                };
            };
        };
        responses: {
            /** @description Make a payment method the default (the previous default stops being it). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["PaymentMethod"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listInvoices: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List the organization's invoices, newest period first: one per calendar month (UTC) with usage, issued after it ended. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            invoices: components["schemas"]["Invoice"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    getInvoicePdf: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The invoice's id (`inv-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description An invoice as a PDF document. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Content-Disposition": components["headers"]["ContentDisposition"];
                    [name: string]: unknown;
                };
                content: {
                    "application/pdf": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listAlerts: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List the organization's spending alerts, oldest first. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            alerts: components["schemas"]["Alert"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    createAlert: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description Month-to-date total at which the alert fires: more than 0, at most 1,000,000. */
                    threshold: number;
                    /** @description The catalogue's currency, `USD`. */
                    currency: string;
                    /** @description How the organization is told, at least one, no repeats: `email` mails every member who may read billing. */
                    channels: "email"[];
                };
            };
        };
        responses: {
            /** @description Set a spending alert: once per calendar month (UTC), when the month-to-date total reaches the threshold, the organization is told through the channels. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Alert"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    deleteAlert: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The alert's id (`alr-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    getOrganization: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The caller's organization: id, name, plan. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Organization"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    deleteOrganization: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    updateOrganization: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": {
                    /** @description New name of the organization. 1–100 characters after trimming. */
                    name?: string;
                    /**
                     * @description The plan; changing it needs billing:write (the owner), which identity checks.
                     * @enum {string}
                     */
                    plan?: "free" | "pro" | "enterprise";
                };
            };
        };
        responses: {
            /** @description Rename the organization; changing the plan also needs billing:write. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Organization"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            402: components["responses"]["PaymentRequired"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listMembers: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List the organization's members. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            members: components["schemas"]["Member"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    inviteMember: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description Address the invitation is mailed to. */
                    email: string;
                    /**
                     * @description At most the caller's own role; owner only by transfer.
                     * @enum {string}
                     */
                    role: "admin" | "developer" | "viewer";
                };
            };
        };
        responses: {
            /** @description Invite someone by e-mail; returns the pending invitation (valid 7 days). */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Invitation"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    removeMember: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The member's id (`member-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    updateMember: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The member's id (`member-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /**
                     * @description The new role; the owner's role cannot be changed, and owner is reached only by transfer.
                     * @enum {string}
                     */
                    role: "admin" | "developer" | "viewer";
                };
            };
        };
        responses: {
            /** @description Change a member's role (never the owner's, never to owner). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Member"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listInvitations: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List invitations not yet accepted or cancelled (status pending or expired). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            invitations: components["schemas"]["Invitation"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    cancelInvitation: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The invitation's id (`invite-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    transferOwnership: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description User id (user.id of a member record) of the member who becomes owner. */
                    new_owner_id: string;
                    /** @description The caller's current password. */
                    password: string;
                };
            };
        };
        responses: {
            /** @description Owner only: make another member owner (the caller becomes admin); needs the caller's password. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Transfer"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    listApiKeys: {
        parameters: {
            query?: {
                /** @description Page number. */
                page?: number;
                /** @description Items per page. */
                per_page?: number;
            };
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description List API keys (never their secrets): the caller's own; every key of the organization for owner and admin (settings:write). */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            api_keys: components["schemas"]["ApiKey"][];
                        };
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    createApiKey: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
                /** @description Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); the same key with a different request is 422, while the first is still running 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description What the key is for. 1–100 characters after trimming. */
                    name: string;
                    /** @description Scopes of the key, each one the calling credential holds (else 403) and the creator's role allows; default: every such scope. */
                    scopes?: ("databases:read" | "databases:write" | "backups:write" | "metrics:read" | "members:read" | "members:write" | "settings:write" | "billing:read" | "billing:write" | "organization:delete")[];
                    /**
                     * Format: date-time
                     * @description When the key stops working; default: never.
                     */
                    expires_at?: string;
                };
            };
        };
        responses: {
            /** @description Create an API key (any member), its scopes capped by the calling credential and the creator's role; the secret is in this response only. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["CreatedApiKey"];
                        meta: components["schemas"]["Meta"];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
    revokeApiKey: {
        parameters: {
            query?: never;
            header?: {
                /** @description Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made). */
                "X-Request-Id"?: components["parameters"]["RequestId"];
            };
            path: {
                /** @description The API key's id (`key-…`). */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done; no body. */
            204: {
                headers: {
                    "X-Request-Id": components["headers"]["RequestId"];
                    "X-RateLimit-Limit": components["headers"]["RateLimitLimit"];
                    "X-RateLimit-Remaining": components["headers"]["RateLimitRemaining"];
                    "X-RateLimit-Reset": components["headers"]["RateLimitReset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["InternalError"];
            503: components["responses"]["ServiceUnavailable"];
            504: components["responses"]["GatewayTimeout"];
        };
    };
}
