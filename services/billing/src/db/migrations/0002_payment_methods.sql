-- The payment processor's customer of each organization: its payment methods
-- are attached to it and, later, charges are made on it. One per processor, as
-- a processor's ids mean nothing to another one.
CREATE TABLE processor_customers (
  organization_id text NOT NULL,
  -- The adapter that issued customer_ref (`test`, `stripe`).
  processor       text NOT NULL,
  customer_ref    text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, processor)
);

-- Instruments the payment processor holds for an organization. Neither the
-- card number nor the client-side token ever reaches this table: only what the
-- processor reports about the card, and its own id to charge it by.
CREATE TABLE payment_methods (
  id              text PRIMARY KEY,
  -- Insertion order; only breaks ties between methods created at the same instant.
  seq             bigint GENERATED ALWAYS AS IDENTITY,
  organization_id text NOT NULL,
  processor       text NOT NULL,
  processor_ref   text NOT NULL,
  type            text NOT NULL CHECK (type = 'card'),
  brand           text NOT NULL,
  last4           text NOT NULL CHECK (last4 ~ '^[0-9]{4}$'),
  exp_month       integer NOT NULL CHECK (exp_month BETWEEN 1 AND 12),
  exp_year        integer NOT NULL,
  is_default      boolean NOT NULL DEFAULT false,
  created_at      timestamptz NOT NULL
);

-- A processor id names one instrument: a retried add that the processor
-- answers by replaying its first answer finds the row that answer made.
CREATE UNIQUE INDEX payment_methods_processor_ref ON payment_methods (processor, processor_ref);
-- At most one default per organization, whatever the code above gets wrong.
CREATE UNIQUE INDEX payment_methods_one_default ON payment_methods (organization_id) WHERE is_default;
-- Lists, oldest first.
CREATE INDEX payment_methods_org_created ON payment_methods (organization_id, created_at, seq);
