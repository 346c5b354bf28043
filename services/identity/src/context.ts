import type { Client } from "@connectrpc/connect";
import type pg from "pg";
import { createInternalClient, createLogger, createPool, systemClock, type Clock, type Logger } from "@dbaas/kit";
import { BillingService } from "@dbaas/proto/billing";
import { DatabasesService } from "@dbaas/proto/databases";
import type { Config } from "./config.ts";
import { createLogSender, createMailRelay, createSealer, createSmtpSender, type MailRelay, type MailSender, type Sealer } from "./mail.ts";
import { createPasswordHasher, type PasswordHasher } from "./passwords.ts";
import { createRevocationHub, type RevocationHub } from "./revocations.ts";

/** What identity needs of the databases service: whether an organization still has databases. */
export type DatabasesClient = Pick<Client<typeof DatabasesService>, "listDatabases">;

/** What identity needs of the billing service: whether an organization has a payment method. */
export type BillingClient = Pick<Client<typeof BillingService>, "getStanding">;

/** Everything handlers depend on, built once at start-up and passed down. */
export interface AppContext {
  pool: pg.Pool;
  /** What "now" is wherever time matters: token and invitation expiry, the login-failure window, mail retries. */
  clock: Clock;
  log: Logger;
  passwords: PasswordHasher;
  tokenTtlSeconds: number;
  /** Base of links in mails (invitations). */
  publicBaseUrl: string;
  sealer: Sealer;
  mailRelay: MailRelay;
  revocations: RevocationHub;
  /** Unset when DATABASES_URL is not configured: organizations cannot be deleted then. */
  databases: DatabasesClient | undefined;
  /** Unset when BILLING_URL is not configured: organizations cannot move to a paid plan then. */
  billing: BillingClient | undefined;
}

/** What a test (or another entry) swaps: a clock it moves, a logger, mail kept in memory, fake peers. */
export type ContextOverrides = Partial<Pick<AppContext, "pool" | "clock" | "log" | "databases" | "billing">> & {
  mailSender?: MailSender;
};

/** The context of `config`, as every service builds it: `createContext(config, overrides?)`. */
export function createContext(config: Config, overrides: ContextOverrides = {}): AppContext {
  const log = overrides.log ?? createLogger("identity");
  const pool = overrides.pool ?? createPool(config.databaseUrl, config.databaseSchema);
  const clock = overrides.clock ?? systemClock;
  const sealer = createSealer(config.internalSecret);
  const sender = overrides.mailSender ?? (config.smtpUrl ? createSmtpSender(config.smtpUrl, config.mailFrom) : createLogSender(log));
  const databases =
    overrides.databases ??
    (config.databasesUrl
      ? createInternalClient(DatabasesService, config.databasesUrl, { secret: config.internalSecret, caller: "identity" })
      : undefined);
  const billing =
    overrides.billing ??
    (config.billingUrl
      ? createInternalClient(BillingService, config.billingUrl, { secret: config.internalSecret, caller: "identity" })
      : undefined);
  return {
    pool,
    clock,
    log,
    passwords: createPasswordHasher(config.scryptN),
    tokenTtlSeconds: config.tokenTtlSeconds,
    publicBaseUrl: config.publicBaseUrl,
    sealer,
    mailRelay: createMailRelay({ pool, clock, log, sender, sealer, pollMs: config.mailPollMs }),
    revocations: createRevocationHub(config.databaseUrl, config.databaseSchema, log),
    databases,
    billing,
  };
}
