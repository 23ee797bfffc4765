package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// devStore opens a store on dbURL, closed at cleanup, that opens the
// content sealed by the dev process of data directory dataDir, with that
// process's master key (written here first when the process has not made
// it yet; the process then uses it).
func devStore(t *testing.T, dbURL, dataDir string) *store.Store {
	t.Helper()
	keys, err := seal.LoadOrCreateKeyFile(filepath.Join(dataDir, "master.key"))
	require.NoError(t, err)
	box, err := seal.NewRing(keys[0], keys[1:]...)
	require.NoError(t, err)
	return storetest.Open(t, store.Config{URL: dbURL, MasterKey: box})
}

// newMasterKey returns a fresh POSTHASTE_MASTER_KEY value.
func newMasterKey(t *testing.T) string {
	t.Helper()
	k, err := seal.NewKey()
	require.NoError(t, err)
	return k
}

// TestDevContentIsSealedAtRest sends an email with an attachment over the
// API and a message over SMTP through a dev process, then reads PostgreSQL
// directly: no body, attachment or submitted source is stored in
// plaintext anywhere in the email tables, while the API still returns the
// bodies and the MX receives the messages as sent.
func TestDevContentIsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	dev := shared(t, "member")
	env := dev.env
	dbURL := dev.databaseURL(t)
	dataDir := env["POSTHASTE_DATA_DIR"]
	owner := dev.newTeam(t, "member.test")
	c := apiClient{t: t, base: dev.base, key: owner.APIKey}

	const (
		htmlMark   = "HtmlMarker7f3a"
		textMark   = "TextMarker7f3a"
		attachMark = "AttachmentMarker7f3a"
		smtpMark   = "SmtpSourceMarker7f3a"
	)
	id := c.send(map[string]any{"from": "Acme <onboarding@posthaste.test>", "to": owner.Email,
		"subject": "At rest", "html": "<p>" + htmlMark + "</p>", "text": textMark,
		"attachments": []map[string]any{{"filename": "notes.txt",
			"content": base64.StdEncoding.EncodeToString([]byte(attachMark + " in the file"))}}})
	c.waitFor(id, map[string]string{owner.Email: "delivered"})

	starttls, _ := smtpPorts(t, env)
	data := filepath.Join(t.TempDir(), "msg.eml")
	require.NoError(t, os.WriteFile(data, []byte("From: Acme <onboarding@posthaste.test>\r\n"+
		"To: "+owner.Email+"\r\nSubject: Raw at rest\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n\r\n"+smtpMark+"\r\n"), 0o600))
	out, ids := swaks(t, "--server", starttls, "--tls", "--tls-verify", "--tls-ca-path", smtpCA(t, dataDir),
		"--tls-sni", "localhost", "--auth", "PLAIN", "--auth-user", "posthaste", "--auth-password", c.key,
		"--from", "onboarding@posthaste.test", "--to", owner.Email, "--data", data)
	require.Len(t, ids, 1, out)
	c.waitFor(ids[0], map[string]string{owner.Email: "delivered"})

	// The MX got both messages, whole.
	msgs := dev.messagesTo(t, owner.Email, 2, 10*time.Second)
	var all strings.Builder
	for _, m := range msgs {
		all.Write(m.Data)
	}
	require.Contains(t, all.String(), htmlMark)
	require.Contains(t, all.String(), textMark)
	require.Contains(t, all.String(), base64.StdEncoding.EncodeToString([]byte(attachMark+" in the file")))
	require.Contains(t, all.String(), smtpMark)

	// The API still shows the bodies.
	status, e := c.do("GET", "/emails/"+id, nil)
	require.Equal(t, 200, status, e)
	require.Equal(t, "<p>"+htmlMark+"</p>", e["html"])
	require.Equal(t, textMark, e["text"])

	// PostgreSQL holds none of it in plaintext.
	// (The dev is shared: other teams' rows are searched too.)
	counts := requireNoPlaintext(t, dbURL, []string{"email", "email_message", "email_source", "attachment"},
		htmlMark, textMark, attachMark, smtpMark)
	for table, n := range map[string]int{"email": 2, "email_message": 2, "email_source": 1, "attachment": 1} {
		require.GreaterOrEqual(t, counts[table], n, "every table was searched with content in it: %v", counts)
	}
	db, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer db.Close(ctx)
	var keys int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM team_data_key WHERE team_id = $1`, owner.TeamID).Scan(&keys))
	require.Equal(t, 1, keys, "the team's one data key")
}

// requireNoPlaintext fails unless no row of tables, as text (bytea
// columns in hex), contains a mark or its hex form. It returns the number
// of rows of each table, so callers can check there was something to
// search.
func requireNoPlaintext(t *testing.T, dbURL string, tables []string, marks ...string) map[string]int {
	t.Helper()
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer db.Close(ctx)
	counts := map[string]int{}
	for _, table := range tables {
		var n int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		counts[table] = n
		for _, mark := range marks {
			var found int
			require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM `+table+` t
				WHERE strpos(t::text, $1) > 0 OR strpos(t::text, $2) > 0`,
				mark, hex.EncodeToString([]byte(mark))).Scan(&found))
			require.Zero(t, found, "%s holds %q in plaintext", table, mark)
		}
	}
	return counts
}
