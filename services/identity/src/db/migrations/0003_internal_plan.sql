-- `internal`: our own tooling's organizations (benchmarks, synthetic checks); only support sets it.
ALTER TABLE organizations DROP CONSTRAINT organizations_plan_check;
ALTER TABLE organizations ADD CONSTRAINT organizations_plan_check CHECK (plan IN ('free', 'pro', 'enterprise', 'internal'));
