package audit

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestEveryFieldIsHashed(t *testing.T) {
	team, actor := uuid.New(), uuid.New()
	base := Entry{Seq: 1, ID: uuid.New(), TeamID: &team, ActorType: ActorUser, ActorID: &actor,
		Action: APIKeyCreate, TargetType: "api_key", TargetID: "k", ClientAddr: "192.0.2.1",
		UserAgent: "ua", Outcome: Success, Detail: "{}", CreatedAt: time.Unix(1, 0), PrevHash: Genesis}
	h := base.ComputeHash()
	other := uuid.New()
	for name, change := range map[string]func(*Entry){
		"seq": func(e *Entry) { e.Seq = 2 }, "id": func(e *Entry) { e.ID = other },
		"team": func(e *Entry) { e.TeamID = nil }, "actor type": func(e *Entry) { e.ActorType = ActorAdmin },
		"actor": func(e *Entry) { e.ActorID = &other }, "action": func(e *Entry) { e.Action = APIKeyRevoke },
		"target type": func(e *Entry) { e.TargetType = "x" }, "target": func(e *Entry) { e.TargetID = "x" },
		"addr": func(e *Entry) { e.ClientAddr = "x" }, "ua": func(e *Entry) { e.UserAgent = "x" },
		"outcome": func(e *Entry) { e.Outcome = Failure }, "detail": func(e *Entry) { e.Detail = `{"a":1}` },
		"time": func(e *Entry) { e.CreatedAt = e.CreatedAt.Add(time.Microsecond) },
		"prev": func(e *Entry) { e.PrevHash = bytes.Repeat([]byte{1}, 32) },
		// Length prefixes keep field boundaries: moving a byte across them differs.
		"boundary": func(e *Entry) { e.TargetType, e.TargetID = "api_keyk", "" },
	} {
		e := base
		change(&e)
		if bytes.Equal(e.ComputeHash(), h) {
			t.Errorf("changing %s keeps the hash", name)
		}
	}
}

func TestVerifierFindsTheFirstBrokenLink(t *testing.T) {
	var chain []Entry
	prev := Genesis
	for i := range 4 {
		e := Entry{Seq: int64(i + 1), ID: uuid.New(), ActorType: ActorAdmin, Action: TeamCreate,
			Outcome: Success, Detail: "{}", PrevHash: prev}
		e.Hash = e.ComputeHash()
		prev = e.Hash
		chain = append(chain, e)
	}
	chain[2].UserAgent = "changed"
	v := NewVerifier(0, Genesis)
	for i, e := range chain {
		err := v.Check(e)
		if i < 2 && err != nil {
			t.Fatalf("entry %d: %v", i+1, err)
		}
		if i == 2 {
			be, ok := err.(*BrokenError)
			if !ok || be.Seq != 3 {
				t.Fatalf("entry 3: got %v", err)
			}
			return
		}
	}
}

func TestActionsAreValid(t *testing.T) {
	for _, a := range Actions() {
		if !a.Valid() {
			t.Errorf("%s not valid", a)
		}
	}
	if Action("nope").Valid() {
		t.Error("unknown action valid")
	}
}
