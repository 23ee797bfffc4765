package delivery

import (
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// recipientReturnPaths returns the return path of each of rcpts of e, an
// email from domain d: its own signed one (reports.RecipientReturnPath,
// naming the recipient's index in e), so that a report to it can be about
// that recipient only, and each recipient's copy goes in a transaction of
// its own. nil for mail without a domain or in a process without a VERP
// key, which is sent with the return path of its delivery group.
func (a *Sending) recipientReturnPaths(e store.Email, d *store.Domain, rcpts []string) (map[string]string, error) {
	if e.DomainID == nil || d == nil || len(a.verpKey) == 0 {
		return nil, nil
	}
	index := recipientIndex(e)
	out := make(map[string]string, len(rcpts))
	for _, r := range rcpts {
		i, ok := index[r]
		if !ok {
			return nil, fmt.Errorf("recipient of %s not found", e.ID)
		}
		rp, err := reports.RecipientReturnPath(a.verpKey, e.ID, i, d.ReturnPath+"."+d.Name)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypePermanent, err)
		}
		out[r] = rp
	}
	return out, nil
}
