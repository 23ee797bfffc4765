package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/activities"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// TestCheckDomainKeepsDMARCPolicy checks that a verification check stores
// the DMARC policy it found, which acceptance reads for its insights: ""
// for no record, the p= value once one is published, and the last value
// when a lookup fails.
func TestCheckDomainKeepsDMARCPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	d, _ := insertDomain(t, st, newBox(t), "policy.test")
	dns := dnstest.NewServer(t)
	acts := activities.New(activities.Config{Records: recordsCfg, Resolver: dns.Resolver()}, st, nil, nil, nil)
	in := contract.CheckDomainInput{DomainID: d.ID.String()}
	policy := func() *string {
		got, err := st.Domains.GetDomain(ctx, d.TeamID, d.ID)
		require.NoError(t, err)
		return got.DMARCPolicy
	}
	require.Nil(t, policy(), "unknown before any check")

	_, err := run[contract.CheckDomainInput, contract.CheckDomainResult](t, acts.CheckDomain, in)
	require.NoError(t, err)
	require.NotNil(t, policy())
	require.Equal(t, "", *policy())

	dns.AddTXT("_dmarc.policy.test", "v=DMARC1; p=Quarantine; rua=mailto:d@policy.test")
	_, err = run[contract.CheckDomainInput, contract.CheckDomainResult](t, acts.CheckDomain, in)
	require.NoError(t, err)
	require.Equal(t, "quarantine", *policy())

	dns.ServFail("_dmarc.policy.test", true)
	_, err = run[contract.CheckDomainInput, contract.CheckDomainResult](t, acts.CheckDomain, in)
	require.NoError(t, err)
	require.Equal(t, "quarantine", *policy(), "a failed lookup keeps the last policy")
}
