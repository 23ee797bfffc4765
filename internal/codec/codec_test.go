package codec_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/posthaste/posthaste/internal/codec"
	"github.com/posthaste/posthaste/internal/keyring"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// mail is a value that declares its addresses.
type mail struct {
	Team uuid.UUID
	To   []string
	Note string
}

func (m mail) PersonalData() (uuid.UUID, []string) { return m.Team, m.To }

type fixture struct {
	st    *store.Store
	box   *seal.Box
	team  uuid.UUID
	keys  *codec.Keys
	codec *codec.Codec
	dc    converter.DataConverter
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st := storetest.New(t)
	key, err := seal.ParseKey(strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	box, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	team := uuid.New()
	if err := st.Accounts.CreateTeam(context.Background(), store.Team{ID: team, Name: "t"}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, box: box, team: team}
	f.keys, f.codec, f.dc = f.open(t)
	return f
}

// open returns another process's view: its own cache.
func (f *fixture) open(t *testing.T) (*codec.Keys, *codec.Codec, converter.DataConverter) {
	t.Helper()
	keys, err := codec.NewKeys(codec.Config{}, f.box, f.st.Privacy)
	if err != nil {
		t.Fatal(err)
	}
	c := codec.New(keys)
	return keys, c, codec.NewDataConverter(nil, c)
}

func (f *fixture) encode(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := f.dc.ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundTripHidesAddresses(t *testing.T) {
	f := newFixture(t)
	in := mail{Team: f.team, To: []string{"Alice@Example.test", "bob@example.test"}, Note: "hello"}
	p := f.encode(t, in)
	raw, _ := protojsonBytes(p)
	for _, s := range []string{"alice@example.test", "Alice@Example.test", "bob@example.test", "hello"} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("encoded payload holds %q", s)
		}
	}
	// Another process decodes it.
	_, _, dc := f.open(t)
	var out mail
	if err := dc.FromPayload(p, &out); err != nil {
		t.Fatal(err)
	}
	if out.Note != "hello" || len(out.To) != 2 || out.To[0] != "Alice@Example.test" {
		t.Fatalf("decoded %+v", out)
	}
	// The same address (normalised) has one key: a payload naming it
	// differently reads with the same key.
	q := f.encode(t, mail{Team: f.team, To: []string{" ALICE@example.TEST "}})
	if err := dc.FromPayload(q, &out); err != nil {
		t.Fatal(err)
	}
}

func protojsonBytes(p *commonpb.Payload) ([]byte, error) { return protojson.Marshal(p) }

func TestUntaggedPassesThrough(t *testing.T) {
	f := newFixture(t)
	plain, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"email": "carol@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{map[string]string{"email": "carol@example.test"}, mail{To: []string{"carol@example.test"}},
		mail{Team: f.team}, (*mail)(nil)} {
		p := f.encode(t, v)
		if _, ok := v.(map[string]string); ok && !bytes.Equal(p.Data, plain.Data) {
			t.Errorf("untagged payload changed: %s", p.Data)
		}
		if string(p.Metadata["encoding"]) == "binary/posthaste-encrypted" {
			t.Errorf("%#v was encrypted", v)
		}
	}
	// Decoding a plain payload (a history from before the codec) leaves it.
	got, err := f.codec.Decode([]*commonpb.Payload{plain})
	if err != nil || got[0] != plain {
		t.Fatalf("decode of plain payload: %v %v", got, err)
	}
}

func TestErasedSubjectMakesPayloadsUnreadable(t *testing.T) {
	f := newFixture(t)
	one := f.encode(t, mail{Team: f.team, To: []string{"dave@example.test"}})
	both := f.encode(t, mail{Team: f.team, To: []string{"erin@example.test", "dave@example.test"}})
	other := f.encode(t, mail{Team: f.team, To: []string{"erin@example.test"}})
	otherKeys, _, otherDC := f.open(t)
	var out mail
	if err := otherDC.FromPayload(both, &out); err != nil { // warms the other process's cache
		t.Fatal(err)
	}
	if err := f.keys.Erase(context.Background(), f.team, "Dave@Example.test"); err != nil {
		t.Fatal(err)
	}
	if err := f.keys.Erase(context.Background(), f.team, "dave@example.test"); err != nil {
		t.Fatalf("erasing again: %v", err)
	}
	for name, p := range map[string]*commonpb.Payload{"one": one, "both": both} {
		_, err := f.codec.Decode([]*commonpb.Payload{p})
		if !errors.Is(err, codec.ErrErased) {
			t.Errorf("%s: decode after erase: %v", name, err)
		}
	}
	if err := f.dc.FromPayload(other, &out); err != nil || out.To[0] != "erin@example.test" {
		t.Fatalf("another subject's payload: %v %+v", err, out)
	}
	// A process that never had the key cannot read it either; one that
	// cached it forgets it within the cache bound.
	_, fresh, _ := f.open(t)
	if _, err := fresh.Decode([]*commonpb.Payload{one}); !errors.Is(err, codec.ErrErased) {
		t.Errorf("fresh process: %v", err)
	}
	if otherKeys.CacheTTL() != codec.DefaultCacheTTL {
		t.Errorf("cache bound %v", otherKeys.CacheTTL())
	}
}

func TestCacheBoundForgetsErasedKeys(t *testing.T) {
	f := newFixture(t)
	keys, err := codec.NewKeys(codec.Config{CacheTTL: 50 * time.Millisecond}, f.box, f.st.Privacy)
	if err != nil {
		t.Fatal(err)
	}
	c := codec.New(keys)
	p := f.encode(t, mail{Team: f.team, To: []string{"frank@example.test"}})
	if _, err := c.Decode([]*commonpb.Payload{p}); err != nil {
		t.Fatal(err)
	}
	if err := f.keys.Erase(context.Background(), f.team, "frank@example.test"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.Decode([]*commonpb.Payload{p})
		if errors.Is(err, codec.ErrErased) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still decodes after the cache bound: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling a clock-bound condition
	}
}

func TestTamperingIsDetected(t *testing.T) {
	f := newFixture(t)
	base := f.encode(t, mail{Team: f.team, To: []string{"gina@example.test", "hank@example.test"}})
	other := f.encode(t, mail{Team: f.team, To: []string{"hank@example.test"}})
	cases := map[string]func(p *commonpb.Payload){
		"flipped byte": func(p *commonpb.Payload) { p.Data[len(p.Data)-1] ^= 1 },
		"truncated":    func(p *commonpb.Payload) { p.Data = p.Data[:10] },
		"dropped subject": func(p *commonpb.Payload) {
			p.Metadata["posthaste-subjects"] = other.Metadata["posthaste-subjects"]
		},
		"other team": func(p *commonpb.Payload) { p.Metadata["posthaste-team"] = []byte(uuid.NewString()) },
		"bad team":   func(p *commonpb.Payload) { p.Metadata["posthaste-team"] = []byte("x") },
		"bad subject": func(p *commonpb.Payload) {
			p.Metadata["posthaste-subjects"] = []byte("zz")
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			p := &commonpb.Payload{Metadata: map[string][]byte{}, Data: bytes.Clone(base.Data)}
			for k, v := range base.Metadata {
				p.Metadata[k] = v
			}
			mutate(p)
			if _, err := f.codec.Decode([]*commonpb.Payload{p}); err == nil {
				t.Fatal("tampered payload decoded")
			}
		})
	}
}

func TestConcurrentFirstUseSharesOneKey(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	payloads := make([]*commonpb.Payload, 8)
	errs := make([]error, 8)
	for i := range payloads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, dc := f.open(t)
			payloads[i], errs[i] = dc.ToPayload(mail{Team: f.team, To: []string{"ivan@example.test"}, Note: fmt.Sprint(i)})
		}()
	}
	wg.Wait()
	_, _, dc := f.open(t)
	for i, p := range payloads {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		var out mail
		if err := dc.FromPayload(p, &out); err != nil || out.Note != fmt.Sprint(i) {
			t.Fatalf("payload %d: %v %+v", i, err, out)
		}
	}
}

func TestHandler(t *testing.T) {
	f := newFixture(t)
	enc := f.encode(t, mail{Team: f.team, To: []string{"judy@example.test"}})
	gone := f.encode(t, mail{Team: f.team, To: []string{"kim@example.test"}})
	if err := f.keys.Erase(context.Background(), f.team, "kim@example.test"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/temporal-codec", codec.Handler(codec.HandlerConfig{
		Token: "s3cret", Origins: []string{"http://ui.test"}}, f.codec)))
	defer srv.Close()
	body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{enc, gone}})
	post := func(path, auth string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "http://ui.test")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, _ := post("/temporal-codec/decode", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	if resp, _ := post("/temporal-codec/decode", "Bearer wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", resp.StatusCode)
	}
	for _, c := range []struct{ path, auth string }{{"/temporal-codec/decode", "Bearer s3cret"}, {"/temporal-codec/s3cret/decode", ""}} {
		resp, b := post(c.path, c.auth)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", c.path, resp.StatusCode, b)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "http://ui.test" {
			t.Errorf("CORS header missing")
		}
		var out commonpb.Payloads
		if err := protojson.Unmarshal(b, &out); err != nil {
			var loose struct{ Payloads []struct{ Data []byte } }
			if err := json.Unmarshal(b, &loose); err != nil {
				t.Fatalf("reading %s: %v", b, err)
			}
			for _, p := range loose.Payloads {
				out.Payloads = append(out.Payloads, &commonpb.Payload{Data: p.Data})
			}
		}
		if len(out.Payloads) != 2 || !bytes.Contains(out.Payloads[0].Data, []byte("judy@example.test")) ||
			string(out.Payloads[1].Data) != `{"erased":true}` {
			t.Fatalf("decoded %s", b)
		}
	}
	// A CORS preflight from the UI's origin.
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/temporal-codec/decode", nil)
	req.Header.Set("Origin", "http://ui.test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

// countingStore counts the store's round trips.
type countingStore struct {
	*store.Privacy
	mu    sync.Mutex
	calls int
}

func (c *countingStore) count() {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
}

func (c *countingStore) SubjectKeys(ctx context.Context, team uuid.UUID, subjects [][]byte, fresh []store.SubjectKey) (map[string]store.SubjectKey, error) {
	c.count()
	return c.Privacy.SubjectKeys(ctx, team, subjects, fresh)
}

func (c *countingStore) FindSubjectKeys(ctx context.Context, team uuid.UUID, subjects [][]byte) (map[string]store.SubjectKey, error) {
	c.count()
	return c.Privacy.FindSubjectKeys(ctx, team, subjects)
}

// TestOneRoundTripPerPayload (issue 20: no round trips per delivery
// beyond need): a payload's new subjects cost one statement together;
// cached ones none.
// (store.SubjectKeys reads the keys that existed in a second statement.)
func TestOneRoundTripPerPayload(t *testing.T) {
	f := newFixture(t)
	cs := &countingStore{Privacy: f.st.Privacy}
	keys, err := codec.NewKeys(codec.Config{}, f.box, cs)
	if err != nil {
		t.Fatal(err)
	}
	dc := codec.NewDataConverter(nil, codec.New(keys))
	var to []string
	for i := range 50 {
		to = append(to, fmt.Sprintf("r%d@example.test", i))
	}
	// Half of them exist already (another process made them).
	f.encode(t, mail{Team: f.team, To: to[:25]})
	p, err := dc.ToPayload(mail{Team: f.team, To: to})
	if err != nil {
		t.Fatal(err)
	}
	if cs.calls != 1 { // an insert, then a read of the 25 that existed
		t.Fatalf("first encode: %d store calls, want 1", cs.calls)
	}
	var out mail
	for range 3 {
		if _, err := dc.ToPayload(mail{Team: f.team, To: to}); err != nil {
			t.Fatal(err)
		}
		if err := dc.FromPayload(p, &out); err != nil {
			t.Fatal(err)
		}
	}
	if cs.calls != 1 || len(out.To) != 50 {
		t.Fatalf("cached: %d store calls, %d addresses", cs.calls, len(out.To))
	}
}

func BenchmarkEncode(b *testing.B) {
	st := storetest.New(b)
	box, _ := seal.New(make([]byte, seal.KeySize))
	team := uuid.New()
	if err := st.Accounts.CreateTeam(context.Background(), store.Team{ID: team, Name: "b"}); err != nil {
		b.Fatal(err)
	}
	keys, _ := codec.NewKeys(codec.Config{}, box, st.Privacy)
	dc := codec.NewDataConverter(nil, codec.New(keys))
	b.Run("new-address", func(b *testing.B) {
		for i := range b.N {
			if _, err := dc.ToPayload(mail{Team: team, To: []string{fmt.Sprintf("n%d@example.test", i)}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached-address", func(b *testing.B) {
		for range b.N {
			if _, err := dc.ToPayload(mail{Team: team, To: []string{"same@example.test"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("default-converter", func(b *testing.B) {
		for range b.N {
			if _, err := converter.GetDefaultDataConverter().ToPayload(mail{Team: team, To: []string{"same@example.test"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestTeamsHaveTheirOwnKeys: the same address has a key per team;
// erasing it for one team leaves the other's payloads readable.
func TestTeamsHaveTheirOwnKeys(t *testing.T) {
	f := newFixture(t)
	other := uuid.New()
	if err := f.st.Accounts.CreateTeam(context.Background(), store.Team{ID: other, Name: "b"}); err != nil {
		t.Fatal(err)
	}
	a := f.encode(t, mail{Team: f.team, To: []string{"lee@example.test"}})
	b := f.encode(t, mail{Team: other, To: []string{"lee@example.test"}})
	if err := f.keys.Erase(context.Background(), f.team, "lee@example.test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.codec.Decode([]*commonpb.Payload{a}); !errors.Is(err, codec.ErrErased) {
		t.Errorf("team A's payload after A's erasure: %v", err)
	}
	var out mail
	if err := f.dc.FromPayload(b, &out); err != nil || out.Team != other {
		t.Errorf("team B's payload after A's erasure: %v %+v", err, out)
	}
}

// TestKeysSurviveMasterKeyRotation: subject keys are a sealed column of
// the registry (store.SealedColumns) and the subject-id key is pinned, so
// after a rotation with the old key dropped, payloads still decode and
// erasures still find their keys.
func TestKeysSurviveMasterKeyRotation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	oldKey, newKey := make([]byte, seal.KeySize), make([]byte, seal.KeySize)
	oldKey[0], newKey[0] = 1, 2
	ring := func(keys ...[]byte) *seal.Box {
		t.Helper()
		b, err := seal.NewRing(keys[0], keys[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		b, err = keyring.Pin(ctx, f.st, b, []string{codec.SubjectIDPurpose})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	codecOf := func(b *seal.Box) (*codec.Keys, converter.DataConverter) {
		k, err := codec.NewKeys(codec.Config{}, b, f.st.Privacy)
		if err != nil {
			t.Fatal(err)
		}
		return k, codec.NewDataConverter(nil, codec.New(k))
	}
	_, before := codecOf(ring(oldKey))
	p, err := before.ToPayload(mail{Team: f.team, To: []string{"max@example.test", "nia@example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := keyring.Rotate(ctx, f.st, ring(newKey, oldKey), store.SealedColumns(), keyring.Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range rep.Columns {
		if c.Column == "subject_key.sealed_key" {
			found = c.Resealed == 2 && c.Remaining == 0
		}
	}
	if !found {
		t.Fatalf("subject keys were not re-sealed: %+v", rep)
	}
	keys, after := codecOf(ring(newKey))
	var out mail
	if err := after.FromPayload(p, &out); err != nil || len(out.To) != 2 {
		t.Fatalf("after rotation: %v %+v", err, out)
	}
	if err := keys.Erase(ctx, f.team, "nia@example.test"); err != nil {
		t.Fatal(err)
	}
	_, fresh := codecOf(ring(newKey))
	if err := fresh.FromPayload(p, &out); !errors.Is(err, codec.ErrErased) {
		t.Fatalf("erasure after rotation: %v", err)
	}
}

// downable is a KeyStore that can be made unavailable, as PostgreSQL is
// during an outage.
type downable struct {
	codec.KeyStore
	down bool
}

func (d *downable) FindSubjectKeys(ctx context.Context, team uuid.UUID, subjects [][]byte) (map[string]store.SubjectKey, error) {
	if d.down {
		return nil, fmt.Errorf("reading: %w: connection refused", store.ErrUnavailable)
	}
	return d.KeyStore.FindSubjectKeys(ctx, team, subjects)
}

// A payload that cannot be decrypted while the subject keys are
// unreadable fails a workflow's task (a panic the SDK turns into a retried
// task) instead of reaching the workflow code as its step's error; outside
// a workflow, and for erased keys, decoding returns the error.
func TestWorkflowDecodingWaitsOutAnOutage(t *testing.T) {
	f := newFixture(t)
	p := f.encode(t, mail{Team: f.team, To: []string{"frank@example.test"}})
	ks := &downable{KeyStore: f.st.Privacy, down: true}
	keys, err := codec.NewKeys(codec.Config{}, f.box, ks)
	if err != nil {
		t.Fatal(err)
	}
	dc := codec.NewDataConverter(nil, codec.New(keys))
	var out mail
	if err := dc.FromPayload(p, &out); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("outside a workflow: %v", err)
	}
	wdc := dc.(converter.ContextAware).WithWorkflowContext(nil)
	for name, decode := range map[string]func() error{
		"FromPayload":  func() error { return wdc.FromPayload(p, &out) },
		"FromPayloads": func() error { return wdc.FromPayloads(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}}, &out) },
		"WithContext after": func() error {
			return wdc.(converter.ContextAware).WithContext(context.Background()).FromPayload(p, &out)
		},
	} {
		func() {
			defer func() {
				r := recover()
				tde, ok := r.(codec.TransientDecodeError)
				if !ok || !errors.Is(tde, store.ErrUnavailable) {
					t.Errorf("%s: recovered %v, want a TransientDecodeError", name, r)
				}
			}()
			err := decode()
			t.Errorf("%s: returned %v instead of panicking", name, err)
		}()
	}
	ks.down = false
	if err := wdc.FromPayload(p, &out); err != nil || out.To[0] != "frank@example.test" {
		t.Fatalf("once the database is back: %v %+v", err, out)
	}
	if err := f.keys.Erase(context.Background(), f.team, "frank@example.test"); err != nil {
		t.Fatal(err)
	}
	_, _, fresh := f.open(t)
	if err := fresh.(converter.ContextAware).WithWorkflowContext(nil).FromPayload(p, &out); !errors.Is(err, codec.ErrErased) {
		t.Fatalf("erased, in a workflow: %v", err)
	}
}
