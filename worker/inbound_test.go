package worker

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

func TestInboundWorkflowID(t *testing.T) {
	ref := uuid.MustParse("0190f0a4-7a4c-7000-8000-0000000000cc")
	id, err := WorkflowID(store.OutboxItem{Kind: store.OutboxInbound, TeamID: uuid.New(), Ref: ref})
	require.NoError(t, err)
	require.Equal(t, "inbound/0190f0a4-7a4c-7000-8000-0000000000cc", id)
}
