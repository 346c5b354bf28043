-- Notices mailed to an organization's members (NotifyOrganization), one row per
-- caller-chosen id, written in the transaction that queues the mails: a caller's
-- retry with the same id queues nothing and is answered from here.
CREATE TABLE notifications (
  id               text PRIMARY KEY,
  organization_id  text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  recipients       integer NOT NULL,
  created_at       timestamptz NOT NULL
);
CREATE INDEX notifications_org_idx ON notifications (organization_id);
