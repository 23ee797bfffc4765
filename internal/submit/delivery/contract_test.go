package delivery_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// TestContractValues checks that the values package contract spells out
// (it may not import the store) are the store's.
func TestContractValues(t *testing.T) {
	require.Equal(t, []string{store.EventSent, store.EventDelivered, store.EventDeliveryDelayed, store.EventBounced,
		store.EventComplained, store.EventSuppressed, store.EventFailed},
		[]string{contract.EventSent, contract.EventDelivered, contract.EventDeliveryDelayed, contract.EventBounced,
			contract.EventComplained, contract.EventSuppressed, contract.EventFailed})
	require.Equal(t, []string{store.DomainPending, store.DomainVerified, store.DomainPartiallyVerified,
		store.DomainFailed, store.DomainTemporaryFailure},
		[]string{contract.DomainPending, contract.DomainVerified, contract.DomainPartiallyVerified,
			contract.DomainFailed, contract.DomainTemporaryFailure})
	require.Equal(t, store.DataRequestExport, contract.DataRequestExport)
}
