package delivery_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// An email erased while it was being sent has its last events dropped
// instead of retried for a day.
func TestRecordEventsOfErasedEmail(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	acts := delivery.New(delivery.Config{}, st, nil, nil, nil)
	_, err := run[contract.RecordEventsInput, struct{}](t, acts.RecordEvents, contract.RecordEventsInput{
		EmailID: uuid.Must(uuid.NewV7()).String(), Events: []contract.EventInput{{Type: store.EventFailed}}})
	require.NoError(t, err)
}
