import type { Alert, Invoice, PaymentMethod } from "@dbaas/proto/billing";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Backup, Database, OperationSchema, Replica } from "@dbaas/proto/databases";
import type { ApiKey, Principal, Revocation } from "@dbaas/proto/identity";
import type { StubHa } from "./ha-stub.ts";

/** When every record the stubs make was created. */
export const T0 = new Date("2025-03-01T10:00:00Z");

/** An invoice as billing keeps it, with the document GetInvoicePdf answers for it. */
export interface StubInvoice {
  invoice: Invoice;
  pdf: Uint8Array;
  filename: string;
}

/** A database's backups as the databases service keeps them: newest first, the restore window, why archiving fails. */
export interface StubBackups {
  backups: Backup[];
  earliest?: Date;
  latest?: Date;
  archiveError: string;
}

export interface StubState {
  tokens: Map<string, Principal>;
  authenticateCalls: number;
  databases: Map<string, { db: Database; password: string }>;
  /** Every database's read replicas, by replica id. */
  replicas: Map<string, Replica>;
  /** High availability per database id (none: no standbys). */
  ha: Map<string, StubHa>;
  /** Per database id; none: no backup yet. */
  backups: Map<string, StubBackups>;
  /** Operations logged beyond the two every database lists (backups, restores, WAL archiving), per database id. */
  operations: Map<string, Array<MessageInitShape<typeof OperationSchema>>>;
  apiKeys: ApiKey[];
  /** Every organization's payment methods, oldest first. */
  paymentMethods: PaymentMethod[];
  /** Every organization's invoices, in any order: a test seeds them. */
  invoices: StubInvoice[];
  /** Every organization's alerts, oldest first. */
  alerts: Alert[];
  /** While true, creating a database named "flaky" fails with UNAVAILABLE. */
  flaky: boolean;
  /** Requests as the upstreams received them, by RPC name. */
  seen: Map<string, unknown[]>;
  /** Open WatchRevocations streams: push a revocation, or "break" to end the stream with UNAVAILABLE. */
  watchers: Set<(event: Revocation | "break") => void>;
  /** While true, WatchRevocations is refused with UNAVAILABLE (identity's feed is down). */
  feedDown: boolean;
  /** Subscriptions handed out so far (they are numbered). */
  subscriptions: number;
  /** AckRevocation calls, with what `cacheSizeAtAck` said when each arrived. */
  acks: Array<{ subscriptionId: string; seq: number; cacheSize: number | undefined }>;
  /** Set by a test: reads the gateway's cache when an acknowledgement arrives. */
  cacheSizeAtAck?: () => number;
}

/** Notes a request as an upstream received it, for a test to look at (`state.seen`). */
export function record(state: StubState, rpc: string, req: unknown): void {
  const list = state.seen.get(rpc) ?? [];
  list.push(req);
  state.seen.set(rpc, list);
}
