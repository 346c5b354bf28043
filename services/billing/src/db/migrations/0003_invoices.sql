-- The calendar months (UTC) still to be closed, per organization: next_period
-- is the first month not closed yet. Ingest moves it back to the month of an
-- event that falls before it, so usage delivered late for a month closed
-- without an invoice is still invoiced; the closer moves it forward.
CREATE TABLE invoice_schedule (
  organization_id text PRIMARY KEY,
  next_period     date NOT NULL CHECK (extract(day FROM next_period) = 1)
);
CREATE INDEX invoice_schedule_next_period ON invoice_schedule (next_period);

-- Organizations metered before invoices existed start at their first event.
INSERT INTO invoice_schedule (organization_id, next_period)
SELECT organization_id, date_trunc('month', min(occurred_at) AT TIME ZONE 'UTC')::date
  FROM status_events
 GROUP BY organization_id;

-- The bill of one calendar month of an organization. Amounts are whole cents.
CREATE TABLE invoices (
  id              text PRIMARY KEY,
  organization_id text NOT NULL,
  -- First day of the month billed.
  period          date NOT NULL CHECK (extract(day FROM period) = 1),
  -- The sum of the lines; a month that rounds to nothing gets no invoice.
  amount_cents    bigint NOT NULL CHECK (amount_cents > 0),
  currency        text NOT NULL,
  status          text NOT NULL CHECK (status IN ('open', 'paid', 'past_due')),
  issued_at       timestamptz NOT NULL,
  due_at          timestamptz NOT NULL,
  paid_at         timestamptz,
  -- When the closer loop next charges it; null once paid. Hooks (a new
  -- default payment method) charge a past-due invoice whatever this says.
  next_charge_at  timestamptz,
  CHECK ((status = 'paid') = (paid_at IS NOT NULL)),
  CHECK (status <> 'paid' OR next_charge_at IS NULL),
  -- Closing a month twice (two closers, a retry) cannot bill it twice. Also
  -- serves the list, newest period first.
  UNIQUE (organization_id, period)
);
CREATE INDEX invoices_next_charge ON invoices (next_charge_at) WHERE next_charge_at IS NOT NULL;
CREATE INDEX invoices_past_due ON invoices (organization_id) WHERE status = 'past_due';

CREATE TABLE invoice_lines (
  invoice_id   text NOT NULL REFERENCES invoices (id),
  position     integer NOT NULL,
  description  text NOT NULL,
  quantity     numeric NOT NULL,
  unit         text NOT NULL,
  amount_cents bigint NOT NULL CHECK (amount_cents >= 0),
  PRIMARY KEY (invoice_id, position)
);

-- Every charge sent to the payment processor for an invoice. The row is
-- committed as `pending` before the processor is asked, and the processor call
-- carries its idempotency key: when the process dies before the answer is
-- stored, the retry sends the same key with the same parameters and the
-- processor replays its first answer instead of charging again.
CREATE TABLE charge_attempts (
  invoice_id         text NOT NULL REFERENCES invoices (id),
  attempt            integer NOT NULL CHECK (attempt > 0),
  idempotency_key    text NOT NULL UNIQUE,
  processor          text NOT NULL,
  customer_ref       text NOT NULL,
  payment_method_id  text NOT NULL REFERENCES payment_methods (id),
  payment_method_ref text NOT NULL,
  amount_cents       bigint NOT NULL CHECK (amount_cents > 0),
  currency           text NOT NULL,
  -- `failed`: the processor refused the request itself (nothing was charged).
  status             text NOT NULL CHECK (status IN ('pending', 'succeeded', 'declined', 'failed')),
  -- The processor's id of the charge, once it succeeded.
  charge_ref         text,
  -- Why it was declined or failed, in our words.
  failure            text,
  created_at         timestamptz NOT NULL,
  -- Last time the request went out; a pending attempt not answered within the
  -- lease since then is presumed lost with its process and sent again.
  sent_at            timestamptz NOT NULL,
  finished_at        timestamptz,
  PRIMARY KEY (invoice_id, attempt)
);
-- One charge in flight per invoice, whatever the code above gets wrong.
CREATE UNIQUE INDEX charge_attempts_one_pending ON charge_attempts (invoice_id) WHERE status = 'pending';
