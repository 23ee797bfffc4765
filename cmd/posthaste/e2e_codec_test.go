package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/posthaste/posthaste/internal/codec"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/smtptest"
	"github.com/posthaste/posthaste/workflows"
)

// TestPersonalDataInTemporalIsCryptoShredded (issue 22): a send to a
// real MX and to sandbox addresses leaves no recipient address readable in
// any Temporal history, read raw (without the codec); through the codec
// endpoint they read; once the subject keys are erased, every process
// (here dev, after its cache bound) answers the erased placeholder and a
// fresh codec cannot decrypt them.
func TestPersonalDataInTemporalIsCryptoShredded(t *testing.T) {
	// The MX defers the first RCPT quoting the address, as MXes do, so the
	// delivery's local attempt, its result and the regular Deliver that
	// takes over all reach the history.
	dns := dnstest.NewServer(t)
	mx := smtptest.NewServer(t, smtptest.Options{STARTTLS: true, Rcpt: func(rcpt string, n int) error {
		if n == 1 {
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1},
				Message: "<" + rcpt + ">: greylisted, try again"}
		}
		return nil
	}})
	dns.AddMX("member.test", "mx.member.test", 10)
	dns.AddA("mx.member.test", "127.0.0.1")
	dbURL := pgtest.NewDatabase(t)
	env := devEnv(t, dbURL, dns, mx)
	env["POSTHASTE_DELIVERY_RETRY_INITIAL"] = "1s"
	tag := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	member := "owner-" + tag + "@member.test"
	env["POSTHASTE_ADMIN_EMAIL"] = member
	env["POSTHASTE_CODEC_TOKEN"] = "codec-s3cret"
	env["POSTHASTE_CODEC_CACHE_TTL"] = "1s"
	env["POSTHASTE_TEMPORAL_UI_PORT"] = fmt.Sprint(freePort(t))
	dev := startDev(t, env)
	defer dev.stop(t)
	dataDir := env["POSTHASTE_DATA_DIR"]
	creds := readCredentials(t, dataDir)
	c := apiClient{t: t, base: dev.base, key: creds.APIKey}

	bounced := "bounced+" + tag + "@posthaste.test"
	delivered := "delivered+" + tag + "@posthaste.test"
	id := c.send(map[string]any{
		"from": "Acme <onboarding@posthaste.test>", "to": []string{member, bounced}, "cc": delivered,
		"subject": "Codec", "text": "hello",
	})
	c.waitFor(id, map[string]string{member: "delivered", bounced: "bounced", delivered: "delivered"})
	mx.WaitMessages(t, 1, 30*time.Second)
	addresses := []string{member, bounced, delivered}

	// Every history of the namespace, read raw.
	raw, err := tclient.Dial(tclient.Options{HostPort: "127.0.0.1:" + env["POSTHASTE_TEMPORAL_PORT"]})
	require.NoError(t, err)
	defer raw.Close()
	ctx := context.Background()
	var encrypted []*commonpb.Payload
	var histories, events int
	ids := map[string]bool{workflows.EmailWorkflowID(id): true}
	var next []byte
	for {
		res, err := raw.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{NextPageToken: next})
		require.NoError(t, err)
		for _, w := range res.Executions {
			ids[w.Execution.WorkflowId] = true
		}
		if next = res.NextPageToken; len(next) == 0 {
			break
		}
	}
	for wid := range ids {
		{
			histories++
			it := raw.GetWorkflowHistory(ctx, wid, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				require.NoError(t, err)
				events++
				b, err := proto.Marshal(ev)
				require.NoError(t, err)
				for _, a := range addresses {
					require.False(t, bytes.Contains(bytes.ToLower(b), []byte(strings.ToLower(a))),
						"%s is readable in event %d (%s) of %s", a, ev.EventId, ev.EventType, wid)
					require.False(t, bytes.Contains(b, []byte(tag)), "the address's tag is readable in %s", ev.EventType)
				}
				encrypted = append(encrypted, encryptedPayloads(ev.ProtoReflect())...)
			}
		}
	}
	require.NotZero(t, histories)
	require.NotEmpty(t, encrypted, "the send's payloads are encrypted (%d events)", events)
	t.Logf("%d histories, %d events, %d encrypted payloads", histories, events, len(encrypted))

	// Through the codec endpoint they read, with the operator token only.
	decode := func(auth string) (int, string) {
		body, err := protojson.Marshal(&commonpb.Payloads{Payloads: encrypted})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, dev.base+"/temporal-codec/decode", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	status, _ := decode("")
	require.Equal(t, http.StatusUnauthorized, status)
	status, _ = decode("Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, status)
	status, body := decode("Bearer codec-s3cret")
	require.Equal(t, http.StatusOK, status, body)
	decoded := decodedText(t, body)
	for _, a := range addresses {
		require.Contains(t, decoded, a, "the codec decodes the address")
	}
	require.NotContains(t, decoded, `{"erased":true}`)

	// dev's Temporal UI is pointed at the endpoint, and its origin may
	// call it from the browser.
	uiOrigin := "http://127.0.0.1:" + env["POSTHASTE_TEMPORAL_UI_PORT"]
	res, err := http.Get(uiOrigin + "/api/v1/settings")
	require.NoError(t, err)
	var settings struct{ Codec struct{ Endpoint string } }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&settings))
	res.Body.Close()
	require.Equal(t, dev.base+"/temporal-codec/codec-s3cret", settings.Codec.Endpoint)
	reqBody, err := protojson.Marshal(&commonpb.Payloads{Payloads: encrypted})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, settings.Codec.Endpoint+"/decode", bytes.NewReader(reqBody))
	require.NoError(t, err)
	req.Header.Set("Origin", uiOrigin)
	req.Header.Set("Content-Type", "application/json")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.Equal(t, uiOrigin, res.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, decodedText(t, string(b)), member)

	// Erase the three subjects, as the erasure workflow will.
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var team uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT team_id FROM email WHERE id = $1`, id).Scan(&team))
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	require.NoError(t, err)
	defer st.Close()
	// The erasure runs in another process with the same keys (the ring,
	// with the subject-id key pinned), as the erasure workflow will.
	box, err := masterKey(ctx, config.Domains{}, st, filepath.Join(dataDir, "master.key"))
	require.NoError(t, err)
	keys, err := codec.NewKeys(codec.Config{}, box, st.Privacy)
	require.NoError(t, err)
	var before int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM subject_key WHERE team_id = $1`, team).Scan(&before))
	for _, a := range addresses {
		require.NoError(t, keys.Erase(ctx, team, a))
	}
	var after int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM subject_key WHERE team_id = $1`, team).Scan(&after))
	require.Equal(t, before-3, after, "one key per address was erased")

	_, err = codec.New(keys).Decode(encrypted)
	require.ErrorIs(t, err, codec.ErrErased)
	// dev forgets the keys within its cache bound (1 s here).
	eventually(t, 20*time.Second, func() error {
		status, body = decode("Bearer codec-s3cret")
		require.Equal(t, http.StatusOK, status, body)
		decoded = decodedText(t, body)
		if strings.Contains(decoded, tag) {
			return fmt.Errorf("dev still decodes erased payloads: %s", decoded)
		}
		return nil
	})
	require.Contains(t, decoded, `{"erased":true}`)
}

// devCodec is the codec of a dev process: its master key in dataDir, its
// subject keys in the database at dbURL (see recordDecodedHistory).
func devCodec(t *testing.T, dbURL, dataDir string) *codec.Codec {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	box, err := masterKey(ctx, config.Domains{}, st, filepath.Join(dataDir, "master.key"))
	require.NoError(t, err)
	keys, err := codec.NewKeys(codec.Config{}, box, st.Privacy)
	require.NoError(t, err)
	return codec.New(keys)
}

// requireReplayable fails a test that would write a replay fixture
// holding encrypted payloads: the replay tests (package workflows) read
// fixtures with the SDK's default data converter, without the keys.
// Decode them first (codec.Codec.Decode with the dev's master key and
// database, or the dev's /temporal-codec/decode).
func requireReplayable(t *testing.T, h *historypb.History) {
	t.Helper()
	require.Empty(t, encryptedPayloads(h.ProtoReflect()),
		"the history holds payloads encrypted by internal/codec; decode them before saving it as a replay fixture")
}

// encryptedPayloads returns the payloads in m (at any depth) that the
// codec encrypted.
func encryptedPayloads(m protoreflect.Message) []*commonpb.Payload {
	if p, ok := m.Interface().(*commonpb.Payload); ok {
		if string(p.Metadata["encoding"]) == "binary/posthaste-encrypted" {
			return []*commonpb.Payload{p}
		}
		return nil
	}
	var out []*commonpb.Payload
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				out = append(out, encryptedPayloads(v.List().Get(i).Message())...)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				out = append(out, encryptedPayloads(mv.Message())...)
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			out = append(out, encryptedPayloads(v.Message())...)
		}
		return true
	})
	return out
}

// decodedText joins the data of the payloads in a codec endpoint answer.
func decodedText(t *testing.T, body string) string {
	t.Helper()
	var ps commonpb.Payloads
	require.NoError(t, protojson.Unmarshal([]byte(body), &ps), body)
	var b strings.Builder
	for _, p := range ps.Payloads {
		b.Write(p.Data)
		b.WriteByte('\n')
	}
	return b.String()
}
