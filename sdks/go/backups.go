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
