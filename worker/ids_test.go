package worker

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/outbox"
	"github.com/posthaste/posthaste/internal/store"
)

func TestWorkflowIDs(t *testing.T) {
	team := uuid.MustParse("0190f0a4-7a4c-7000-8000-000000000001")
	email := uuid.MustParse("0190f0a4-7a4c-7000-8000-000000000002")
	batch := uuid.MustParse("0190f0a4-7a4c-7000-8000-000000000003")
	key := "order/42"
	emoji := strings.Repeat("😀", 256)
	tests := []struct {
		name string
		ref  store.EmailRef
		want string
	}{
		{"email", store.EmailRef{ID: email, TeamID: team}, "email/" + email.String()},
		{"keyed email", store.EmailRef{ID: email, TeamID: team, IdempotencyKey: &key},
			"email/" + team.String() + "/order/42/" + email.String()},
		{"email of a batch", store.EmailRef{ID: email, TeamID: team, BatchID: &batch}, "batch/" + batch.String()},
		{"email of a keyed batch", store.EmailRef{ID: email, TeamID: team, BatchID: &batch, IdempotencyKey: &key},
			"batch/" + team.String() + "/order/42/" + batch.String()},
		{"256 emoji", store.EmailRef{ID: email, TeamID: team, IdempotencyKey: &emoji},
			"email/" + team.String() + "/h-8041e66714937367b6c831f9d738485d/" + email.String()},
		{"restarted", store.EmailRef{ID: email, TeamID: team, Restarts: 2}, "email/" + email.String() + "/retry-2"},
		{"restarted email of a keyed batch", store.EmailRef{ID: email, TeamID: team, BatchID: &batch,
			IdempotencyKey: &key, Restarts: 1}, "email/" + email.String() + "/retry-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, EmailWorkflowID(tt.ref))
			require.LessOrEqual(t, len(EmailWorkflowID(tt.ref)), 255)
		})
	}

	id, err := WorkflowID(store.OutboxItem{Kind: store.OutboxSendEmail, TeamID: team, Ref: email, IdempotencyKey: &emoji})
	require.NoError(t, err)
	require.Equal(t, EmailWorkflowID(store.EmailRef{ID: email, TeamID: team, IdempotencyKey: &emoji}), id,
		"the starter and the waker agree")
	_, err = WorkflowID(store.OutboxItem{Kind: "send_fax", Ref: email})
	require.ErrorIs(t, err, outbox.ErrUnstartable)
}
