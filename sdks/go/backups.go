package dbaas

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Backup is a base backup of a database.
type Backup struct {
	ID            string     `json:"id"`
	Type          string     `json:"type"`   // scheduled, manual
	Status        string     `json:"status"` // running, completed, failed
	StartedAt     time.Time  `json:"started_at"`
	CompletedAt   *time.Time `json:"completed_at"` // nil while running
	SizeBytes     int64      `json:"size_bytes"`
	FailureReason *string    `json:"failure_reason"`
}

// WalArchiving says whether a database's WAL reaches the backup store.
type WalArchiving struct {
	Status string  `json:"status"` // healthy, failing
	Error  *string `json:"error"`
}

// BackupPage is one page of a database's backups (newest first) with its restore window.
type BackupPage struct {
	Backups             []Backup     `json:"backups"`
	EarliestRestoreTime *time.Time   `json:"earliest_restore_time"` // nil until a backup completed
	LatestRestoreTime   *time.Time   `json:"latest_restore_time"`
	WalArchiving        WalArchiving `json:"wal_archiving"`
	Meta                ListMeta     `json:"-"`
}

// RestoredDatabase is a new database restored from another's backups, with its password: shown this once.
type RestoredDatabase struct {
	CreatedDatabase
	RestoredFrom RestoredFrom `json:"restored_from"`
}

// RestoreDatabaseRequest is the body of RestoreDatabase; nil or empty fields take the API's
// defaults (the latest restorable instant, the source's tier and region).
type RestoreDatabaseRequest struct {
	Name        string     `json:"name"`
	RestoreTime *time.Time `json:"restore_time,omitempty"`
	Tier        string     `json:"tier,omitempty"`
	Region      string     `json:"region,omitempty"`
}

// Metrics are a database's metrics over [Start, End] at Step seconds.
type Metrics struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Step    int       `json:"step"`
	Metrics []Metric  `json:"metrics"`
}

// Metric is one metric's series, one per label set.
type Metric struct {
	Name   string         `json:"name"`
	Unit   string         `json:"unit"`
	Series []MetricSeries `json:"series"`
}

// MetricSeries holds the points of one label set.
type MetricSeries struct {
	Labels map[string]string `json:"labels"`
	Points []Point           `json:"points"`
}

// Point is one bucket's value; Time is the bucket's start.
type Point struct {
	Time  time.Time
	Value float64
}

// UnmarshalJSON reads the API's [unix seconds, value] pair.
func (p *Point) UnmarshalJSON(b []byte) error {
	var pair []float64
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	if len(pair) != 2 {
		return fmt.Errorf("dbaas: a metric point has %d elements, not 2", len(pair))
	}
	p.Time, p.Value = time.Unix(int64(pair[0]), 0).UTC(), pair[1]
	return nil
}

// MetricsOptions selects the range, step and metrics of GetMetrics; zero values take the
// API's defaults (the last hour, 60 s, every metric).
type MetricsOptions struct {
	Start, End time.Time
	Step       int // seconds, at least 60
	Names      []string
}

// ListBackups returns one page of a database's base backups with its restore window and the state of WAL archiving.
func (c *Client) ListBackups(ctx context.Context, id string, opts *ListOptions) (*BackupPage, error) {
	var out BackupPage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/backups", id), query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllBackups iterates over every base backup of a database, newest first.
func (c *Client) AllBackups(ctx context.Context, id string, opts *ListOptions) *Iterator[Backup] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]Backup, ListMeta, error) {
		p, err := c.ListBackups(ctx, id, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Backups, p.Meta, nil
	})
}

// CreateBackup takes a base backup now (status running); one at a time, of a running database.
func (c *Client) CreateBackup(ctx context.Context, id string) (*Backup, error) {
	var out Backup
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/backups", id)}, &out)
	return result(&out, err)
}

// RestoreDatabase restores a database to a point in time as a NEW database (own id, host and password).
func (c *Client) RestoreDatabase(ctx context.Context, id string, body RestoreDatabaseRequest) (*RestoredDatabase, error) {
	var out RestoredDatabase
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/restore", id), body: body}, &out)
	return result(&out, err)
}

// GetMetrics returns a database's metrics (opts may be nil).
func (c *Client) GetMetrics(ctx context.Context, id string, opts *MetricsOptions) (*Metrics, error) {
	q := url.Values{}
	if opts != nil {
		if !opts.Start.IsZero() {
			q.Set("start", opts.Start.UTC().Format(time.RFC3339Nano))
		}
		if !opts.End.IsZero() {
			q.Set("end", opts.End.UTC().Format(time.RFC3339Nano))
		}
		if opts.Step > 0 {
			q.Set("step", strconv.Itoa(opts.Step))
		}
		if len(opts.Names) > 0 {
			q.Set("names", strings.Join(opts.Names, ","))
		}
	}
	var out Metrics
	_, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/metrics", id), query: q}, &out)
	return result(&out, err)
}
