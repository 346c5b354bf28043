// Command quickstart walks through the API with the Go client: sign up, create a database, wait
// for it to run, connect with psql, list, provoke a validation error and delete the database.
//
//	DBAAS_URL=http://127.0.0.1:8080 go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	dbaas "github.com/dbaas/dbaas-go"
)

func main() {
	log.SetFlags(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Sign up: a new user and organization, and a login token for the rest.
	email := fmt.Sprintf("quickstart-%d@example.com", time.Now().UnixNano())
	account, err := dbaas.NewClient().Signup(ctx, dbaas.SignupRequest{
		Email: email, Password: "a-long-password", Name: "Ada", OrganizationName: "Quickstart",
	})
	if err != nil {
		log.Fatalf("signup: %v", err)
	}
	fmt.Printf("signed up: %s (organization %s, plan %s)\n", account.User.Email, account.Organization.ID, account.Organization.Plan)
	c := dbaas.NewClient(dbaas.WithToken(account.AccessToken))

	// Create a database: its password is in this answer only.
	created, err := c.CreateDatabase(ctx, dbaas.CreateDatabaseRequest{Name: "orders", Region: "fsn1", Tier: "micro"})
	if err != nil {
		log.Fatalf("create: %v", err)
	}
	fmt.Printf("created: %s (%s)\n", created.ID, created.Status)

	db, err := c.WaitForStatus(ctx, created.ID, "running")
	if err != nil {
		log.Fatalf("wait: %v", err)
	}
	fmt.Printf("running: %s at %s:%d\n", db.ID, db.Host, db.Port)

	out, err := psql(ctx, created.ConnectionString, "SELECT 1")
	if err != nil {
		log.Fatalf("psql: %v", err)
	}
	fmt.Printf("psql: SELECT 1 -> %s\n", out)

	// An API key (for scripts and CI) works like the token; its secret is shown this once.
	key, err := c.CreateAPIKey(ctx, dbaas.CreateAPIKeyRequest{Name: "quickstart", Scopes: []string{"databases:read"}})
	if err != nil {
		log.Fatalf("api key: %v", err)
	}
	withKey := dbaas.NewClient(dbaas.WithAPIKey(key.Secret))
	it := withKey.AllDatabases(ctx, nil)
	for it.Next() {
		d := it.Value()
		fmt.Printf("listed with API key %s…: %s %s %s %s\n", key.Prefix, d.ID, d.Name, d.Tier, d.Status)
	}
	if err := it.Err(); err != nil {
		log.Fatalf("list: %v", err)
	}
	rl := withKey.RateLimit()
	fmt.Printf("rate limit: %d of %d left until %s\n", rl.Remaining, rl.Limit, rl.Reset.UTC().Format(time.RFC3339))

	// A name of one character is refused with 422 validation_error, one detail per field.
	_, err = c.CreateDatabase(ctx, dbaas.CreateDatabaseRequest{Name: "x", Region: "fsn1", Tier: "micro"})
	var apiErr *dbaas.Error
	if !errors.As(err, &apiErr) {
		log.Fatalf("expected an API error, got %v", err)
	}
	fmt.Printf("error: %d %s: %s (request %s)\n", apiErr.Status, apiErr.Code, apiErr.Message, apiErr.RequestID)
	for _, d := range apiErr.Details {
		fmt.Printf("  %s: %s\n", d.Field, d.Message)
	}

	if err := c.DeleteDatabase(ctx, created.ID); err != nil {
		log.Fatalf("delete: %v", err)
	}
	fmt.Printf("deleted: %s\n", created.ID)
	left, err := c.AllDatabases(ctx, nil).Collect()
	if err != nil {
		log.Fatalf("list: %v", err)
	}
	fmt.Printf("databases left: %d\n", len(left))
}

// psql runs one query with Debian's psql client and returns its unaligned output. A host under
// .localhost may not resolve on every machine, so psql is told its address (hostaddr), while TLS
// still sees the host name.
func psql(ctx context.Context, connectionString, query string) (string, error) {
	u, err := url.Parse(connectionString)
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(u.Hostname(), ".localhost") {
		q := u.Query()
		q.Set("hostaddr", "127.0.0.1")
		u.RawQuery = q.Encode()
	}
	cmd := exec.CommandContext(ctx, "psql", u.String(), "--no-psqlrc", "--tuples-only", "--no-align", "--command", query)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}
