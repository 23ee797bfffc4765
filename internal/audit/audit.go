// Package audit defines Posthaste's audit log: the closed list of audited
// actions, the entry recorded for each state-changing action by a dashboard
// user, an API key or `posthaste admin`, and the hash chain that makes the
// log tamper-evident.
//
// There is one chain for the whole installation, not one per team: entries
// of installation-level admin actions belong to no team, and one linear
// chain is verified by one walk. Each entry's Hash is SHA-256 over a
// canonical encoding of its fields and the previous entry's Hash
// (PrevHash); changing, removing or reordering an entry breaks the link at
// that entry. Package store appends entries under a lock on the chain head
// so the chain stays linear across processes, and its retention sweep
// removes whole old prefixes only, keeping the hash of the last removed
// entry as the anchor the remaining chain starts from.
//
// Entries carry ids, never email addresses or names, so erasing a person
// never requires rewriting (and so breaking) the chain.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// ActorType says who acted.
type ActorType string

const (
	ActorUser   ActorType = "user"    // a dashboard user; ActorID is the user id
	ActorAPIKey ActorType = "api_key" // an API key; ActorID is the key id
	ActorAdmin  ActorType = "admin"   // `posthaste admin` on the server; no ActorID
	ActorSystem ActorType = "system"  // Posthaste itself
	// ActorUnknown is a failed sign-in of nobody known.
	ActorUnknown ActorType = "unknown"
)

// Outcome says whether the action took effect.
type Outcome string

const (
	Success Outcome = "success"
	Failure Outcome = "failure"
)

// Action is one audited action. The constants below are the closed list;
// the database's CHECK on audit_entry.action does not repeat it, so adding
// an action needs no migration.
type Action string

const (
	APIKeyCreate Action = "api_key.create"
	APIKeyRevoke Action = "api_key.revoke"
	APIKeyRename Action = "api_key.rename"

	SignIn         Action = "user.sign_in"
	SignOut        Action = "user.sign_out"
	MFAEnable      Action = "user.mfa_enable"
	MFADisable     Action = "user.mfa_disable"
	PasswordChange Action = "user.password_change"
	PasswordReset  Action = "user.password_reset"
	SessionRevoke  Action = "user.session_revoke"

	MemberRemove Action = "member.remove"
	InviteCreate Action = "invitation.create"
	InviteRevoke Action = "invitation.revoke"
	InviteAccept Action = "invitation.accept"

	DomainCreate Action = "domain.create"
	DomainUpdate Action = "domain.update"
	DomainVerify Action = "domain.verify"
	DomainDelete Action = "domain.delete"

	WebhookCreate       Action = "webhook.create"
	WebhookUpdate       Action = "webhook.update"
	WebhookDelete       Action = "webhook.delete"
	WebhookRotateSecret Action = "webhook.rotate_secret"

	SuppressionCreate Action = "suppression.create"
	SuppressionDelete Action = "suppression.delete"

	TeamCreate       Action = "team.create"
	TeamSetPlan      Action = "team.set_plan"
	TeamSetRateLimit Action = "team.set_rate_limit"
	TeamHealthResume Action = "team.health_resume"
	SettingsUpdate   Action = "team.settings_update"

	// Data subject requests: the actor who asked, then the system when
	// the request's workflow ends it. Entries carry the request id only.
	DataRequestCreate   Action = "data_request.create"
	DataRequestComplete Action = "data_request.complete"
	DataRequestFail     Action = "data_request.fail"

	PoolCreate Action = "ip_pool.create"
	PoolAssign Action = "ip_pool.assign"
	IPWarmup   Action = "ip_address.warmup"

	MasterKeyRotate Action = "master_key.rotate"
)

// actions lists every action, in the order shown in filters.
var actions = []Action{
	APIKeyCreate, APIKeyRevoke, APIKeyRename,
	SignIn, SignOut, MFAEnable, MFADisable, PasswordChange, PasswordReset, SessionRevoke,
	MemberRemove, InviteCreate, InviteRevoke, InviteAccept,
	DomainCreate, DomainUpdate, DomainVerify, DomainDelete,
	WebhookCreate, WebhookUpdate, WebhookDelete, WebhookRotateSecret,
	SuppressionCreate, SuppressionDelete,
	TeamCreate, TeamSetPlan, TeamSetRateLimit, TeamHealthResume, SettingsUpdate,
	DataRequestCreate, DataRequestComplete, DataRequestFail,
	PoolCreate, PoolAssign, IPWarmup,
	MasterKeyRotate,
}

// Actions returns the closed list of actions (a copy).
func Actions() []Action { return append([]Action(nil), actions...) }

// Valid reports whether a is one of the listed actions.
func (a Action) Valid() bool {
	for _, x := range actions {
		if x == a {
			return true
		}
	}
	return false
}

// Entry is one audit log entry. TeamID is nil for installation-level
// actions; ActorID is nil for admin and unknown actors. Detail is a small
// JSON object without personal data ("" is stored as "{}").
type Entry struct {
	Seq        int64 // position in the chain, from 1; set by the store
	ID         uuid.UUID
	TeamID     *uuid.UUID
	ActorType  ActorType
	ActorID    *uuid.UUID
	Action     Action
	TargetType string
	TargetID   string
	ClientAddr string
	UserAgent  string
	Outcome    Outcome
	Detail     string
	CreatedAt  time.Time // stored with microsecond precision
	PrevHash   []byte
	Hash       []byte
}

// Genesis is the PrevHash of the first entry ever appended.
var Genesis = make([]byte, sha256.Size)

// ComputeHash returns SHA-256 over the canonical encoding of e's fields
// (everything but Hash) and PrevHash. The encoding is a version tag and
// then each field as a 4-byte big-endian length and its bytes; times as
// Unix microseconds in decimal; nil ids as empty strings.
func (e Entry) ComputeHash() []byte {
	var b bytes.Buffer
	field := func(s string) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		b.Write(n[:])
		b.WriteString(s)
	}
	field("posthaste-audit-v1")
	field(strconv.FormatInt(e.Seq, 10))
	field(e.ID.String())
	field(idString(e.TeamID))
	field(string(e.ActorType))
	field(idString(e.ActorID))
	field(string(e.Action))
	field(e.TargetType)
	field(e.TargetID)
	field(e.ClientAddr)
	field(e.UserAgent)
	field(string(e.Outcome))
	field(e.Detail)
	field(strconv.FormatInt(e.CreatedAt.UnixMicro(), 10))
	field(string(e.PrevHash))
	sum := sha256.Sum256(b.Bytes())
	return sum[:]
}

func idString(id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	return id.String()
}

// Verifier checks entries in chain order, starting from an anchor: the
// hash the first entry's PrevHash must equal (Genesis, or the hash of the
// last entry the retention sweep removed).
type Verifier struct {
	prev    []byte
	nextSeq int64 // 0: not known yet
	checked int64
}

// NewVerifier starts a walk after the entry with sequence number anchorSeq
// (0 for the start of the chain) whose hash was anchor.
func NewVerifier(anchorSeq int64, anchor []byte) *Verifier {
	return &Verifier{prev: anchor, nextSeq: anchorSeq + 1}
}

// BrokenError reports the first entry whose link does not hold.
type BrokenError struct {
	Seq    int64
	ID     uuid.UUID
	Reason string
}

func (e *BrokenError) Error() string {
	return fmt.Sprintf("audit chain broken at entry %d (%s): %s", e.Seq, e.ID, e.Reason)
}

// Check verifies the next entry of the chain; it returns a *BrokenError
// when e does not follow the entries checked before it.
func (v *Verifier) Check(e Entry) error {
	switch {
	case e.Seq != v.nextSeq:
		return &BrokenError{Seq: e.Seq, ID: e.ID,
			Reason: fmt.Sprintf("expected entry %d: entries are missing", v.nextSeq)}
	case !bytes.Equal(e.PrevHash, v.prev):
		return &BrokenError{Seq: e.Seq, ID: e.ID, Reason: fmt.Sprintf(
			"previous hash %s does not match %s", hex.EncodeToString(e.PrevHash), hex.EncodeToString(v.prev))}
	case !bytes.Equal(e.ComputeHash(), e.Hash):
		return &BrokenError{Seq: e.Seq, ID: e.ID, Reason: "the entry's content does not match its hash"}
	}
	v.prev = e.Hash
	v.nextSeq++
	v.checked++
	return nil
}

// Checked returns how many entries passed.
func (v *Verifier) Checked() int64 { return v.checked }

// Head returns the hash and sequence number the chain ends with so far.
func (v *Verifier) Head() (int64, []byte) { return v.nextSeq - 1, v.prev }

// Filter narrows a listing of entries; zero fields do not filter. From is
// inclusive, To exclusive.
type Filter struct {
	Action   Action
	ActorID  *uuid.UUID
	TargetID string
	From, To *time.Time
}

// FilterError is a filter parameter that does not parse; its message names
// the parameter in the API's vocabulary (`name` in backquotes).
type FilterError struct{ Message string }

func (e *FilterError) Error() string { return e.Message }

// ParseFilter reads the filters of a query, as both the API (GET
// /audit-log) and the dashboard's Audit page take them: action, actor_id,
// target_id, from and to (RFC 3339 times, or dates: the start of that
// UTC day). get returns "" for an absent one.
func ParseFilter(get func(string) string) (Filter, error) {
	var f Filter
	if v := get("action"); v != "" {
		if !Action(v).Valid() {
			return f, &FilterError{"The `action` parameter must be one of the audited actions."}
		}
		f.Action = Action(v)
	}
	if v := get("actor_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return f, &FilterError{"The `actor_id` parameter must be a valid id."}
		}
		f.ActorID = &id
	}
	f.TargetID = get("target_id")
	for _, q := range []struct {
		name string
		dst  **time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := get(q.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				// A date alone is the start of that UTC day.
				if t, err = time.Parse(time.DateOnly, v); err != nil {
					return f, &FilterError{"The `" + q.name + "` parameter must be an RFC 3339 time or a date."}
				}
			}
			*q.dst = &t
		}
	}
	return f, nil
}

// Succeeded is the entry of a successful action by actor (an entry with its
// team, actor and client filled in) on a target, with detail (a small
// object without personal data, or nil) as its Detail. The store appends
// it in the transaction of the change it records.
func Succeeded(actor Entry, action Action, targetType, targetID string, detail map[string]any) (Entry, error) {
	actor.Action, actor.TargetType, actor.TargetID, actor.Outcome = action, targetType, targetID, Success
	if detail != nil {
		b, err := json.Marshal(detail)
		if err != nil {
			return Entry{}, fmt.Errorf("encoding the detail of %s: %w", action, err)
		}
		actor.Detail = string(b)
	}
	return actor, nil
}
