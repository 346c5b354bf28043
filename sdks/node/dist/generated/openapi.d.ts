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
        /** @description A database as lists show it: exactly these fields (spec 2.1). */
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
            /** @description Compressed bytes stored; 0 until completed. */
            size_bytes: number;
            /** @description Why it failed; null otherwise. */
            failure_reason: string | null;
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
            /** @description Bytes of WAL not yet replayed, as last measured; 0 until measured. */
            lag_bytes: number;
            /** Format: date-time */
            created_at: string;
        };
        /** @description A database's metrics (DESIGN.md, Metrics). */
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
             * @description `restore`: a deleted database brought back, or a database made from another's backups; `promote`: the database a promoted read replica became; `backup`: a base backup; `wal_archive`: WAL archiving started failing (failed, with why) or resumed (succeeded).
             * @enum {string}
             */
            type: "create" | "start" | "stop" | "restart" | "resize" | "delete" | "restore" | "promote" | "backup" | "wal_archive";
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
        /** @description Month-to-date usage of the organization and its price (spec 2.4). */
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
                /** @description Running time. */
                compute: {
                    hours: number;
                    amount: number;
                };
                /** @description Stored data. */
                storage: {
                    /** @description GB-months. */
                    gb: number;
                    amount: number;
                };
                /** @description Data transferred. */
                data_transfer: {
                    gb: number;
                    amount: number;
                };
                /** @description Replica running time. */
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
        /** @description The bill of one calendar month (UTC), issued after the month ended and charged to the default payment method (spec 2.5). */
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
        /** @description A spending alert (spec 4.2): fires at most once per calendar month (UTC). */
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
             * @description Rate limits follow the plan (spec 8).
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
        /** @description A member of the organization (spec 2.2). */
        Member: {
            /** @description Identifier, prefix `member-`. */
            id: string;
            user: components["schemas"]["User"];
            /** @enum {string} */
            role: "owner" | "admin" | "developer" | "viewer";
            /** Format: date-time */
            joined_at: string;
        };
        /** @description An invitation (spec 2.3). */
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
        /** @description Rate limit exceeded (spec 8); the X-RateLimit-* headers describe the exhausted window. */
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
