-- What each agent's servers run with for each tier before a customer's override (RegisterAgent's
-- tier_settings, {tier: {name: value}}): the defaults the configuration API shows.
ALTER TABLE agents ADD COLUMN tier_settings jsonb NOT NULL DEFAULT '{}';

-- A database's configuration overrides (docs/product.md, Inside the database), normalized as the agent
-- applies them; a database without a row has none. `generation` is bumped by every change; the agent
-- reports the generation its server has and what waits there for a restart. A replica's row holds only
-- what its agent reported (it runs its primary's overrides).
CREATE TABLE database_config (
  database_id text PRIMARY KEY REFERENCES databases (id),
  parameters jsonb NOT NULL DEFAULT '{}',
  generation bigint NOT NULL DEFAULT 0,
  applied_generation bigint NOT NULL DEFAULT 0,
  pending_restart text[] NOT NULL DEFAULT '{}',
  updated_at timestamptz NOT NULL DEFAULT now()
);
