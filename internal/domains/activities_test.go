package domains_test

import (
	"context"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/acttest"
	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var recordsCfg = records.Config{BounceHost: "bounce.posthaste.example", SPFInclude: "_spf.posthaste.example"}

// insertDomain adds a verified domain with a sealed key to a new team.
func insertDomain(t *testing.T, st *store.Store, name string) (store.Domain, dkim.Key) {
	t.Helper()
	ctx := context.Background()
	box, err := seal.New(make([]byte, 32))
	require.NoError(t, err)
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	key, err := dkim.GenerateKey()
	require.NoError(t, err)
	d := store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: name, Region: "eu-west-1",
		Status: store.DomainVerified, ReturnPath: "bounce", TLS: store.TLSEnforced, DKIMSelector: "sel",
		DKIMPublicKey: key.PublicBase64}
	d.DKIMPrivateKey, err = box.Seal(key.PrivatePKCS8, d.ID[:])
	require.NoError(t, err)
	require.NoError(t, st.Domains.CreateDomain(ctx, d))
	return d, key
}

func TestCheckDomain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	d, key := insertDomain(t, st, "shop.test")
	dns := dnstest.NewServer(t)
	acts := domains.NewActivities(domains.ActivitiesConfig{Records: recordsCfg, Resolver: dns.Resolver()}, st.Domains)
	in := contract.CheckDomainInput{DomainID: d.ID.String()}

	dns.AddTXT("sel._domainkey.shop.test", dkim.RecordValue(key.PublicBase64))
	dns.AddMX("bounce.shop.test", "bounce.posthaste.example", 10)
	res, err := acttest.Run[contract.CheckDomainInput, contract.CheckDomainResult](t, acts.CheckDomain, in)
	require.NoError(t, err)
	require.Equal(t, []contract.RecordCheck{
		{Key: "dkim", Required: true, Found: true},
		{Key: "spf_mx", Required: true, Found: true},
		{Key: "spf_txt", Required: true, Found: false},
		{Key: "dmarc", Required: false, Found: false},
	}, res.Records)

	_, err = acttest.Run[contract.SetDomainStatusInput, struct{}](t, acts.SetDomainStatus, contract.SetDomainStatusInput{
		DomainID: d.ID.String(), Status: "partially_verified", Records: map[string]string{"dkim": "verified"}})
	require.NoError(t, err)
	got, err := st.Domains.GetDomain(ctx, d.TeamID, d.ID)
	require.NoError(t, err)
	require.Equal(t, "partially_verified", got.Status)
	require.Equal(t, "verified", got.RecordStatus["dkim"])

	require.NoError(t, st.Domains.DeleteDomain(ctx, d.TeamID, d.ID, audit.Entry{}))
	res, err = acttest.Run[contract.CheckDomainInput, contract.CheckDomainResult](t, acts.CheckDomain, in)
	require.NoError(t, err)
	require.True(t, res.Deleted, "a deleted domain ends its verification")
}

// TestCheckDomainKeepsDMARCPolicy checks that a verification check stores
// the DMARC policy it found, which acceptance reads for its insights: ""
// for no record, the p= value once one is published, and the last value
// when a lookup fails.
func TestCheckDomainKeepsDMARCPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	d, _ := insertDomain(t, st, "policy.test")
	dns := dnstest.NewServer(t)
	acts := domains.NewActivities(domains.ActivitiesConfig{Records: recordsCfg, Resolver: dns.Resolver()}, st.Domains)
	in := contract.CheckDomainInput{DomainID: d.ID.String()}
	policy := func() *string {
		got, err := st.Domains.GetDomain(ctx, d.TeamID, d.ID)
		require.NoError(t, err)
		return got.DMARCPolicy
	}
	require.Nil(t, policy(), "unknown before any check")

	_, err := acttest.Run[contract.CheckDomainInput, contract.CheckDomainResult](t, acts.CheckDomain, in)
	require.NoError(t, err)
	require.NotNil(t, policy())
	require.Equal(t, "", *policy())

	dns.AddTXT("_dmarc.policy.test", "v=DMARC1; p=Quarantine; rua=mailto:d@policy.test")
	_, err = acttest.Run[contract.CheckDomainInput, contract.CheckDomainResult](t, acts.CheckDomain, in)
	require.NoError(t, err)
	require.Equal(t, "quarantine", *policy())

	dns.ServFail("_dmarc.policy.test", true)
	_, err = acttest.Run[contract.CheckDomainInput, contract.CheckDomainResult](t, acts.CheckDomain, in)
	require.NoError(t, err)
	require.Equal(t, "quarantine", *policy(), "a failed lookup keeps the last policy")
}
