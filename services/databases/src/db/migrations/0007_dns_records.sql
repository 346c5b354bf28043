-- Where clients reach an agent's published ports (AGENT_PUBLIC_ADDRESS): the A/AAAA records of
-- every database it runs point here. Empty for an agent that predates the field.
ALTER TABLE agents ADD COLUMN public_addresses text[] NOT NULL DEFAULT '{}';

-- The host names this service published on the DNS server (DNS_PROVIDER=rfc2136), with what it
-- last sent: written before each update is sent, removed once the name's records were deleted,
-- so the reconcile finds every name it may have left on the server, a delete's included.
CREATE TABLE dns_records (
  name text PRIMARY KEY,
  database_id text NOT NULL,
  addresses text[] NOT NULL,
  ttl integer NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
