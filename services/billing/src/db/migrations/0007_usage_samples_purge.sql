-- The purge of samples past USAGE_SAMPLE_RETENTION_DAYS walks them oldest first, a batch at a time.
CREATE INDEX usage_samples_time ON usage_samples (sampled_at);
