package codec

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/posthaste/posthaste/internal/store"
)

// Payload metadata. A tagged payload (made by the data converter) carries
// metaTeam and metaSubjects; an encrypted one (made by the codec) carries
// them too, in the clear, with metaEncoding set to encodingEncrypted.
const (
	metaEncoding = converter.MetadataEncoding
	metaTeam     = "posthaste-team"
	// metaSubjects lists the payload's subject ids: sorted, unique,
	// lower-case hex, comma-separated.
	metaSubjects      = "posthaste-subjects"
	encodingEncrypted = "binary/posthaste-encrypted"
)

// version1 of an encrypted payload's data: the byte 1, a 96-bit nonce and
// the AES-256-GCM sealing of the original payload (protobuf).
const version1 = 1

// NewDataConverter returns the data converter of every Temporal client:
// parent (nil: the SDK's default) tags the payloads of PersonalData values
// with their subjects, and the codec encrypts them.
func NewDataConverter(parent converter.DataConverter, c *Codec) converter.DataConverter {
	if parent == nil {
		parent = converter.GetDefaultDataConverter()
	}
	return &replaySafe{DataConverter: converter.NewCodecDataConverter(&tagger{DataConverter: parent, keys: c.keys}, c)}
}

// replaySafe is the data converter of NewDataConverter. Bound to a
// workflow (WithWorkflowContext), a payload that cannot be decrypted for
// now, because PostgreSQL, which holds the subject keys, is unavailable,
// panics instead of returning the error: the workflow code would take the
// error for its step's (a local activity's recorded result, read again on
// replay after a restart) and could end the workflow, leaving its email
// without an outcome; a panic fails only the workflow task, which Temporal
// retries until the database is back. Erased keys (ErrErased) and every
// other error, and every decoding outside a workflow (an activity's
// input, which the activity's retry policy retries), return as they are.
type replaySafe struct {
	converter.DataConverter
	inWorkflow bool
}

// TransientDecodeError is the panic value of a payload that a workflow
// could not decode while the subject keys were unreadable.
type TransientDecodeError struct{ Err error }

func (e TransientDecodeError) Error() string {
	return "decoding a payload in a workflow, retried with its task: " + e.Err.Error()
}

func (e TransientDecodeError) Unwrap() error { return e.Err }

func (r *replaySafe) check(err error) error {
	if err != nil && r.inWorkflow && errors.Is(err, store.ErrUnavailable) && !errors.Is(err, ErrErased) {
		panic(TransientDecodeError{err})
	}
	return err
}

// FromPayload implements converter.DataConverter.
func (r *replaySafe) FromPayload(p *commonpb.Payload, valuePtr any) error {
	return r.check(r.DataConverter.FromPayload(p, valuePtr))
}

// FromPayloads implements converter.DataConverter.
func (r *replaySafe) FromPayloads(ps *commonpb.Payloads, valuePtrs ...any) error {
	return r.check(r.DataConverter.FromPayloads(ps, valuePtrs...))
}

// WithWorkflowContext implements converter.ContextAware.
func (r *replaySafe) WithWorkflowContext(ctx converter.WorkflowContext) converter.DataConverter {
	dc := r.DataConverter
	if ca, ok := dc.(converter.ContextAware); ok {
		dc = ca.WithWorkflowContext(ctx)
	}
	return &replaySafe{DataConverter: dc, inWorkflow: true}
}

// WithContext implements converter.ContextAware.
func (r *replaySafe) WithContext(ctx context.Context) converter.DataConverter {
	dc := r.DataConverter
	if ca, ok := dc.(converter.ContextAware); ok {
		dc = ca.WithContext(ctx)
	}
	return &replaySafe{DataConverter: dc, inWorkflow: r.inWorkflow}
}

// tagger tags the payloads of PersonalData values.
type tagger struct {
	converter.DataConverter
	keys *Keys
}

// ToPayload implements converter.DataConverter.
func (t *tagger) ToPayload(value any) (*commonpb.Payload, error) {
	p, err := t.DataConverter.ToPayload(value)
	if err != nil || p == nil {
		return p, err
	}
	pd, ok := value.(PersonalData)
	if !ok {
		return p, nil
	}
	if v := reflect.ValueOf(value); v.Kind() == reflect.Pointer && v.IsNil() {
		return p, nil
	}
	team, addrs := pd.PersonalData()
	if team == uuid.Nil || len(addrs) == 0 {
		return p, nil
	}
	subjects := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if Normalize(a) == "" {
			continue
		}
		subjects = append(subjects, t.keys.SubjectHex(a))
	}
	if len(subjects) == 0 {
		return p, nil
	}
	slices.Sort(subjects)
	subjects = slices.Compact(subjects)
	if p.Metadata == nil {
		p.Metadata = map[string][]byte{}
	}
	p.Metadata[metaTeam] = []byte(team.String())
	p.Metadata[metaSubjects] = []byte(strings.Join(subjects, ","))
	return p, nil
}

// ToPayloads implements converter.DataConverter through ToPayload.
func (t *tagger) ToPayloads(values ...any) (*commonpb.Payloads, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := &commonpb.Payloads{}
	for i, v := range values {
		p, err := t.ToPayload(v)
		if err != nil {
			return nil, fmt.Errorf("values[%d]: %w", i, err)
		}
		out.Payloads = append(out.Payloads, p)
	}
	return out, nil
}

// Codec is the payload codec: it encrypts tagged payloads under their
// subjects' keys and decrypts them while the keys exist. Untagged payloads
// pass through both ways. It is safe for concurrent use.
type Codec struct {
	keys *Keys
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New returns the codec of keys.
func New(keys *Keys) *Codec { return &Codec{keys: keys} }

// Keys returns the subject keys the codec uses (for Erase).
func (c *Codec) Keys() *Keys { return c.keys }

// Encode implements converter.PayloadCodec: tagged payloads are encrypted,
// making their subjects' keys when they have none.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		e, err := c.encode(p)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// Decode implements converter.PayloadCodec: encrypted payloads are
// decrypted; one whose key was erased is an error that wraps ErrErased.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		d, err := c.decode(p)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (c *Codec) encode(p *commonpb.Payload) (*commonpb.Payload, error) {
	md := p.GetMetadata()
	if len(md[metaSubjects]) == 0 || string(md[metaEncoding]) == encodingEncrypted {
		return p, nil
	}
	aead, team, subjects, err := c.cipher(md, true)
	if err != nil {
		return nil, fmt.Errorf("encrypting payload: %w", err)
	}
	plain, err := proto.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encrypting payload: %w", err)
	}
	data := make([]byte, 1+aead.NonceSize(), 1+aead.NonceSize()+len(plain)+aead.Overhead())
	data[0] = version1
	if _, err := rand.Read(data[1:]); err != nil {
		return nil, fmt.Errorf("making nonce: %w", err)
	}
	data = aead.Seal(data, data[1:], plain, payloadAD(team, subjects))
	return &commonpb.Payload{Metadata: map[string][]byte{
		metaEncoding: []byte(encodingEncrypted),
		metaTeam:     []byte(team),
		metaSubjects: []byte(subjects),
	}, Data: data}, nil
}

func (c *Codec) decode(p *commonpb.Payload) (*commonpb.Payload, error) {
	md := p.GetMetadata()
	if string(md[metaEncoding]) != encodingEncrypted {
		return p, nil
	}
	aead, team, subjects, err := c.cipher(md, false)
	if err != nil {
		return nil, fmt.Errorf("decrypting payload: %w", err)
	}
	n := aead.NonceSize()
	if len(p.Data) < 1+n+aead.Overhead() || p.Data[0] != version1 {
		return nil, errors.New("decrypting payload: malformed ciphertext")
	}
	plain, err := aead.Open(nil, p.Data[1:1+n], p.Data[1+n:], payloadAD(team, subjects))
	if err != nil {
		return nil, errors.New("decrypting payload: ciphertext or metadata altered")
	}
	var out commonpb.Payload
	if err := proto.Unmarshal(plain, &out); err != nil {
		return nil, fmt.Errorf("decrypting payload: %w", err)
	}
	return &out, nil
}

// cipher returns the AEAD of a payload's team and subjects (metadata
// values), making missing keys when create is set.
func (c *Codec) cipher(md map[string][]byte, create bool) (cipher.AEAD, string, string, error) {
	team, err := uuid.Parse(string(md[metaTeam]))
	if err != nil {
		return nil, "", "", fmt.Errorf("bad team in payload metadata: %w", err)
	}
	subjects := string(md[metaSubjects])
	ids := strings.Split(subjects, ",")
	if !slices.IsSorted(ids) {
		return nil, "", "", errors.New("payload subjects are not sorted")
	}
	raw := make([][]byte, len(ids))
	for i, id := range ids {
		subject, err := hex.DecodeString(id)
		if err != nil || len(subject) != sha256.Size {
			return nil, "", "", errors.New("bad subject in payload metadata")
		}
		raw[i] = subject
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.keys.cfg.Timeout)
	defer cancel()
	keys, err := c.keys.keys(ctx, team, raw, create)
	if err != nil {
		return nil, "", "", err
	}
	var secret bytes.Buffer
	for _, key := range keys {
		secret.Write(key)
	}
	// One key from all the subjects' keys: destroying any one of them
	// makes the payload unreadable.
	k, err := hkdf.Key(sha256.New, secret.Bytes(), nil, "posthaste payload v1 "+team.String(), keySize)
	if err != nil {
		return nil, "", "", err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, "", "", err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, "", "", err
	}
	return aead, team.String(), subjects, nil
}

// payloadAD binds a ciphertext to its metadata, so subjects cannot be
// swapped or dropped.
func payloadAD(team, subjects string) []byte {
	return []byte("posthaste-payload\x00" + team + "\x00" + subjects)
}
