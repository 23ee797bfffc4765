package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/posthaste/posthaste/internal/codec"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/workflows"
)

// TestDevDataRequests runs a data subject request of each type through
// `posthaste dev`: mail sent to a person (alone and with someone else, one
// with an attachment, one scheduled), the person as a contact, on the
// suppression list, and mail received from them. The export's archive,
// downloaded through its signed URL, holds all of it; after the erasure
// the address appears nowhere in the database, while the other
// recipient's mail is still there.
func TestDevDataRequests(t *testing.T) {
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{STARTTLS: true})
	dns.AddMX("people.test", "mx.people.test", 10)
	dns.AddA("mx.people.test", "127.0.0.1")
	dbURL := pgtest.NewDatabase(t)
	env := domainDevEnv(t, dbURL, dns, mx.Port())
	env["POSTHASTE_DEFAULT_RATE_LIMIT"] = "1000"
	env["POSTHASTE_INBOUND_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// The erasure waits this plus 5 s (which also covers the request
	// log's write interval) before it completes.
	env["POSTHASTE_CODEC_CACHE_TTL"] = "1s"
	dev := startDev(t, env)
	defer dev.stop(t)
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, env["POSTHASTE_DATA_DIR"]).APIKey}
	domainID := c.verifiedDomain(dns, "shop.test")

	person := "Pat.Erase-" + uuid.NewString()[:8] + "@People.test"
	lower := strings.ToLower(person)
	other := "other-" + uuid.NewString()[:8] + "@people.test"
	send := func(body map[string]any) string {
		body["from"] = "Shop <hello@shop.test>"
		status, r := c.do("POST", "/emails", body)
		require.Equal(t, 200, status, r)
		return r["id"].(string)
	}
	alone := send(map[string]any{"to": []string{person}, "subject": "Your order", "html": "<p>Hi Pat</p>",
		"attachments": []map[string]any{{"filename": "invoice.txt",
			"content": base64.StdEncoding.EncodeToString([]byte("Invoice for Pat"))}}})
	again := send(map[string]any{"to": []string{lower}, "subject": "Shipped", "text": "On its way"})
	shared := send(map[string]any{"to": []string{person, other}, "subject": "Team news",
		"html": "<p>Welcome " + lower + " and friends</p>"})
	scheduled := send(map[string]any{"to": []string{person}, "subject": "Later", "text": "later",
		"scheduled_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	for _, id := range []string{alone, again, shared} {
		c.waitLastEvent(id, "delivered")
	}
	status, ct := c.do("POST", "/contacts", map[string]any{"email": person, "first_name": "Pat"})
	require.Equal(t, 201, status, ct)
	status, ct = c.do("GET", "/contacts/"+lower, nil)
	require.Equal(t, 200, status, ct)
	status, sp := c.do("POST", "/suppressions", map[string]any{"email": person})
	require.Equal(t, 201, status, sp)
	received := receiveFrom(t, env, c, domainID, person)
	// The request log is written in the background: wait until it holds
	// the last request naming the person.
	c.waitLogged("/suppressions")

	// Export.
	exportID := c.dataRequest(person, "export")
	exp := c.waitDataRequest(exportID)
	require.Equal(t, "completed", exp["status"], exp)
	found := exp["found"].(map[string]any)
	require.Equal(t, 4.0, found["emails"], found)
	require.Equal(t, 1.0, found["contacts"], found)
	require.Equal(t, 1.0, found["suppressions"], found)
	require.Equal(t, 1.0, found["received_emails"], found)
	require.NotNil(t, exp["expires_at"])
	files := downloadZip(t, exp["download_url"].(string))
	for _, id := range []string{alone, again, shared, scheduled} {
		require.Contains(t, files, "emails/"+id+"/email.json")
	}
	require.Contains(t, string(files["emails/"+alone+"/email.json"]), "Hi Pat")
	require.Contains(t, string(files["emails/"+alone+"/message.eml"]), "Subject: Your order")
	require.Equal(t, "Invoice for Pat", string(files["emails/"+alone+"/attachments/0-invoice.txt"]))
	require.Contains(t, string(files["emails/"+alone+"/email.json"]), `"delivered"`, "with its events")
	require.Contains(t, string(files["contacts.json"]), lower)
	require.Contains(t, string(files["contacts.json"]), `"Pat"`)
	require.Contains(t, string(files["suppressions.json"]), lower)
	require.Contains(t, string(files["received/"+received+"/raw.eml"]), "Subject: Refund please")
	require.Contains(t, string(files["request_log.jsonl"]), "/contacts/"+lower)
	var manifest map[string]any
	require.NoError(t, json.Unmarshal(files["manifest.json"], &manifest))
	require.Equal(t, lower, manifest["email"])
	// A forged signature gets nothing.
	res, err := http.Get(strings.Replace(exp["download_url"].(string), "signature=", "signature=x", 1))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 404, res.StatusCode)

	// Erasure.
	erasureID := c.dataRequest(person, "erasure")
	er := c.waitDataRequest(erasureID)
	require.Equal(t, "completed", er["status"], er)
	found = er["found"].(map[string]any)
	require.Equal(t, 3.0, found["emails_deleted"], found)
	require.Equal(t, 1.0, found["emails_anonymized"], found)
	require.Equal(t, 1.0, found["emails_canceled"], found)
	require.Equal(t, 1.0, found["data_requests"], found, "the export is forgotten too")
	status, _ = c.do("GET", "/emails/"+alone, nil)
	require.Equal(t, 404, status)
	status, se := c.do("GET", "/emails/"+shared, nil)
	require.Equal(t, 200, status, se)
	require.Equal(t, []any{store.ErasedPlaceholder, other}, se["to"])
	require.Equal(t, "<p>Welcome "+store.ErasedPlaceholder+" and friends</p>", se["html"],
		"the sealed body is opened, scrubbed and sealed again")
	status, exp = c.do("GET", "/data-requests/"+exportID, nil)
	require.Equal(t, 200, status, exp)
	require.Nil(t, exp["download_url"], "the earlier export's archive is gone")

	hostPort := "127.0.0.1:" + env["POSTHASTE_TEMPORAL_PORT"]
	saveWorkflowHistory(t, hostPort, workflows.DataRequestWorkflowID(erasureID), "datarequest.json", 40)
	requireAddressErased(t, env, hostPort, person, other)
}

// requireAddressErased asserts that addr (case-insensitively) appears
// nowhere Posthaste keeps data, while kept (an address whose data must
// stay) still does: in every text, JSON, array and bytea column of every
// table of the dev database of env (requireAddressNotInDatabase), and in
// the history of every workflow Temporal shows, raw and decoded through
// the payload codec (requireAddressNotInHistories).
func requireAddressErased(t *testing.T, env map[string]string, temporalHostPort, addr, kept string) {
	t.Helper()
	requireAddressNotInDatabase(t, env["DATABASE_URL"], addr, kept)
	requireAddressNotInHistories(t, env, temporalHostPort, addr)
}

// requireAddressNotInDatabase scans every row of every table of the
// public schema, as text and (for bytea columns) as bytes, for addr.
func requireAddressNotInDatabase(t *testing.T, dbURL, addr, kept string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
		AND c.data_type IN ('text', 'character varying', 'jsonb', 'json', 'ARRAY', 'bytea')
		ORDER BY 1, 2`)
	require.NoError(t, err)
	type column struct{ table, name, kind string }
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.table, &c.name, &c.kind)
	})
	require.NoError(t, err)
	require.NotEmpty(t, cols)
	count := func(a string) map[string]int {
		hits := map[string]int{}
		for _, c := range cols {
			expr := fmt.Sprintf("lower(%q::text)", c.name)
			if c.kind == "bytea" {
				expr = fmt.Sprintf("lower(encode(%q, 'escape'))", c.name)
			}
			var n int
			require.NoError(t, conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q WHERE strpos(%s, $1) > 0`,
				c.table, expr), strings.ToLower(a)).Scan(&n), "%s.%s", c.table, c.name)
			if n > 0 {
				hits[c.table+"."+c.name] = n
			}
		}
		return hits
	}
	require.Empty(t, count(addr), "the erased address is still stored")
	require.NotEmpty(t, count(kept), "the other recipient's data is kept")
}

// requireAddressNotInHistories reads the history of every workflow of the
// namespace: addr must not appear in it as stored, and every payload the
// codec encrypted must either decode (with the dev's master key and
// database, as any process would) to data without addr, or be erased.
// Some payloads must be erased: addr was in histories before. (A payload
// naming addr and another address, such as a delivery to both, is erased
// whole.)
func requireAddressNotInHistories(t *testing.T, env map[string]string, hostPort, addr string) {
	t.Helper()
	ctx := context.Background()
	tc, err := client.Dial(client.Options{HostPort: hostPort})
	require.NoError(t, err)
	defer tc.Close()
	st, err := store.Open(ctx, store.Config{URL: env["DATABASE_URL"]})
	require.NoError(t, err)
	defer st.Close()
	box, err := masterKey(ctx, config.Domains{}, st, filepath.Join(env["POSTHASTE_DATA_DIR"], "master.key"))
	require.NoError(t, err)
	keys, err := codec.NewKeys(codec.Config{}, box, st.Privacy)
	require.NoError(t, err)
	pc := codec.New(keys)
	lower := strings.ToLower(addr)
	var token []byte
	histories, erased, decoded := 0, 0, 0
	for {
		page, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 100,
			NextPageToken: token})
		require.NoError(t, err)
		for _, ex := range page.Executions {
			it := tc.GetWorkflowHistory(ctx, ex.Execution.WorkflowId, ex.Execution.RunId, false,
				enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				require.NoError(t, err)
				b, err := protojson.Marshal(ev)
				require.NoError(t, err)
				require.NotContains(t, strings.ToLower(string(b)), lower,
					"workflow %s names the erased address", ex.Execution.WorkflowId)
				for _, p := range encryptedPayloads(ev.ProtoReflect()) {
					out, err := pc.Decode([]*commonpb.Payload{p})
					if errors.Is(err, codec.ErrErased) {
						erased++
						continue
					}
					require.NoError(t, err)
					data := strings.ToLower(string(out[0].Data))
					require.NotContains(t, data, lower, "workflow %s decodes to the erased address",
						ex.Execution.WorkflowId)
					decoded++
				}
			}
			histories++
		}
		if token = page.NextPageToken; len(token) == 0 {
			break
		}
	}
	require.Positive(t, histories, "there are histories to read")
	require.Positive(t, erased, "the histories held the address, and it can no longer be decoded")
	t.Logf("%d histories: %d payloads erased, %d still decode", histories, erased, decoded)
}

// dataRequest posts a data request and returns its id.
func (c apiClient) dataRequest(addr, typ string) string {
	c.t.Helper()
	status, r := c.do("POST", "/data-requests", map[string]any{"email": addr, "type": typ})
	require.Equal(c.t, 201, status, r)
	return r["id"].(string)
}

// waitDataRequest polls a data request until it ends and returns it.
func (c apiClient) waitDataRequest(id string) map[string]any {
	c.t.Helper()
	return c.waitEnded("/data-requests/"+id, "data request "+id)
}

// waitLastEvent polls an email until its last_event is want.
func (c apiClient) waitLastEvent(id, want string) {
	c.t.Helper()
	eventually(c.t, 60*time.Second, func() error {
		status, e := c.do("GET", "/emails/"+id, nil)
		require.Equal(c.t, 200, status, e)
		if e["last_event"] != want {
			return fmt.Errorf("email %s did not reach %s; last: %v", id, want, e)
		}
		return nil
	})
}

// waitLogged polls the request log until it holds a request to path.
func (c apiClient) waitLogged(path string) {
	c.t.Helper()
	eventually(c.t, 30*time.Second, func() error {
		status, l := c.do("GET", "/logs?limit=100", nil)
		require.Equal(c.t, 200, status, l)
		for _, e := range l["data"].([]any) {
			if e.(map[string]any)["endpoint"] == path {
				return nil
			}
		}
		return fmt.Errorf("no request to %s in the request log", path)
	})
}

// downloadZip fetches a zip archive without a key and returns its files.
func downloadZip(t *testing.T, u string) map[string][]byte {
	t.Helper()
	res, err := http.Get(u)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, 200, res.StatusCode, string(b))
	require.Equal(t, "application/zip", res.Header.Get("Content-Type"))
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, f := range z.File {
		r, err := f.Open()
		require.NoError(t, err)
		files[f.Name], err = io.ReadAll(r)
		require.NoError(t, err)
		r.Close()
	}
	return files
}

// receiveFrom has the team of domainID receive a message from addr at a
// domain with receiving enabled through the dev inbound MX (receiveAt),
// and returns the received email's id once the API lists it.
func receiveFrom(t *testing.T, env map[string]string, c apiClient, domainID, addr string) string {
	t.Helper()
	return receiveAt(t, env, c, domainID, "inbox.shop.test", func(domain string) []byte {
		return []byte("From: Pat <" + addr + ">\r\nTo: support@" + domain + "\r\nSubject: Refund please\r\n" +
			"Message-ID: <refund-1@people.test>\r\n\r\nPlease refund order 9.\r\n")
	})
}
