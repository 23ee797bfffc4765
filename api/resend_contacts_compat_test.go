package api_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/resend/resend-go/v3"
	"github.com/stretchr/testify/require"
)

// TestResendGoSDKContacts drives contacts, contact properties, segments
// and topics with Resend's official Go SDK, unchanged.
func TestResendGoSDKContacts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.goSDK(t, e.keyA)

	prop, err := c.ContactProperties.CreateWithContext(ctx, &resend.CreateContactPropertyRequest{
		Key: "company", Type: "string", FallbackValue: "Acme"})
	require.NoError(t, err)
	require.NotEmpty(t, prop.Id)
	gotProp, err := c.ContactProperties.GetWithContext(ctx, prop.Id)
	require.NoError(t, err)
	require.Equal(t, "Acme", gotProp.FallbackValue)
	_, err = c.ContactProperties.CreateWithContext(ctx, &resend.CreateContactPropertyRequest{Key: "visits", Type: "number"})
	require.NoError(t, err, "an absent fallback is sent as null")

	seg, err := c.Segments.CreateWithContext(ctx, &resend.CreateSegmentRequest{Name: "Newsletter"})
	require.NoError(t, err)
	require.NotEmpty(t, seg.Id)
	topic, err := c.Topics.CreateWithContext(ctx, &resend.CreateTopicRequest{Name: "Product news",
		DefaultSubscription: resend.DefaultSubscriptionOptOut, Description: "Monthly"})
	require.NoError(t, err)
	require.NotEmpty(t, topic.Id)

	created, err := c.Contacts.CreateWithContext(ctx, &resend.CreateContactRequest{Email: "Steve@Example.com",
		FirstName: "Steve", LastName: "Wozniak", Properties: map[string]any{"company": "Apple", "visits": 3},
		Segments: []resend.ContactSegmentRef{{Id: seg.Id}},
		Topics:   []resend.TopicSubscriptionUpdate{{Id: topic.Id, Subscription: "opt_in"}}})
	require.NoError(t, err)
	require.Equal(t, "contact", created.Object)

	got, err := c.Contacts.GetWithContext(ctx, &resend.GetContactOptions{Id: "steve@example.com"})
	require.NoError(t, err)
	require.Equal(t, created.Id, got.Id)
	require.Equal(t, "Steve", got.FirstName)
	require.Equal(t, "Apple", got.Properties["company"])

	_, err = c.Contacts.UpdateWithContext(ctx, &resend.UpdateContactRequest{Id: created.Id, LastName: "Woz"})
	require.NoError(t, err)
	list, err := c.Contacts.ListWithContext(ctx, &resend.ListContactsOptions{SegmentId: seg.Id})
	require.NoError(t, err)
	require.Len(t, list.Data, 1)
	require.Equal(t, "Woz", list.Data[0].LastName)

	topics, err := c.Contacts.Topics.ListWithContext(ctx, created.Id)
	require.NoError(t, err)
	require.Len(t, topics.Data, 1)
	require.Equal(t, "opt_in", topics.Data[0].Subscription)
	_, err = c.Contacts.Topics.UpdateWithContext(ctx, &resend.UpdateContactTopicsRequest{Id: created.Id,
		Topics: []resend.TopicSubscriptionUpdate{{Id: topic.Id, Subscription: "opt_out"}}})
	require.NoError(t, err)
	topics, err = c.Contacts.Topics.ListWithContext(ctx, created.Id)
	require.NoError(t, err)
	require.Equal(t, "opt_out", topics.Data[0].Subscription)

	segs, err := c.Contacts.Segments.ListWithContext(ctx, &resend.ListContactSegmentsRequest{Email: "steve@example.com"})
	require.NoError(t, err)
	require.Len(t, segs.Data, 1)
	require.Equal(t, seg.Id, segs.Data[0].Id)

	removed, err := c.Contacts.RemoveWithContext(ctx, &resend.RemoveContactOptions{Id: created.Id})
	require.NoError(t, err)
	require.True(t, removed.Deleted)
	_, err = c.Topics.RemoveWithContext(ctx, topic.Id)
	require.NoError(t, err)
	_, err = c.Segments.RemoveWithContext(ctx, seg.Id)
	require.NoError(t, err)
}

// TestResendNodeSDKContacts runs testdata/resend-node/contacts.cjs, which
// drives contacts, contact properties, segments and topics with Resend's
// official Node SDK (6.x, installed by scripts/setup.sh with npm ci).
func TestResendNodeSDKContacts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := runResendNode(t, "contacts.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA)
	require.Contains(t, string(out), "ok")
}

// TestResendGoSDKAudienceContacts drives contacts with AudienceId, which
// Resend's Go SDK sends to /audiences/{id}/contacts, unchanged.
func TestResendGoSDKAudienceContacts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.goSDK(t, e.keyA)

	aud, err := c.Audiences.CreateWithContext(ctx, &resend.CreateAudienceRequest{Name: "Registered"})
	require.NoError(t, err)
	created, err := c.Contacts.CreateWithContext(ctx, &resend.CreateContactRequest{AudienceId: aud.Id,
		Email: "grace@example.com", FirstName: "Grace"})
	require.NoError(t, err)
	require.Equal(t, "contact", created.Object)
	got, err := c.Contacts.GetWithContext(ctx, &resend.GetContactOptions{AudienceId: aud.Id, Id: "grace@example.com"})
	require.NoError(t, err)
	require.Equal(t, created.Id, got.Id)
	_, err = c.Contacts.UpdateWithContext(ctx, &resend.UpdateContactRequest{AudienceId: aud.Id, Id: created.Id,
		LastName: "Hopper"})
	require.NoError(t, err)
	list, err := c.Contacts.ListWithContext(ctx, &resend.ListContactsOptions{AudienceId: aud.Id})
	require.NoError(t, err)
	require.Len(t, list.Data, 1)
	require.Equal(t, "Hopper", list.Data[0].LastName)

	other := e.goSDK(t, e.keyB)
	_, err = other.Contacts.GetWithContext(ctx, &resend.GetContactOptions{AudienceId: aud.Id, Id: created.Id})
	require.ErrorContains(t, err, "Audience not found.")

	removed, err := c.Contacts.RemoveWithContext(ctx, &resend.RemoveContactOptions{AudienceId: aud.Id, Id: created.Id})
	require.NoError(t, err)
	require.True(t, removed.Deleted)
	_, err = c.Contacts.GetWithContext(ctx, &resend.GetContactOptions{Id: created.Id})
	require.Error(t, err)
}

// TestResendNodeSDKAudiences runs testdata/resend-node/audiences.cjs: the
// legacy /audiences routes, through the Node SDK's contacts.* with
// audienceId and its own request methods, and another team's 404s.
func TestResendNodeSDKAudiences(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := runResendNode(t, "audiences.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA,
		"OTHER_API_KEY="+e.keyB)
	require.Contains(t, string(out), "ok")
}

// runResendNode runs script of testdata/resend-node with Resend's
// official Node SDK (6.x, installed by scripts/setup.sh with npm ci) and
// the environment env added; it fails the test when node or the SDK is
// missing or the script fails, and returns its standard output.
func runResendNode(t *testing.T, script string, env ...string) []byte {
	t.Helper()
	dir, err := filepath.Abs("testdata/resend-node")
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	require.NoError(t, err, "the Node SDK test needs node: apt-get install nodejs npm")
	_, err = os.Stat(filepath.Join(dir, "node_modules", "resend"))
	require.NoError(t, err, "the Node SDK test needs the SDK: npm ci --prefix api/testdata/resend-node")
	cmd := exec.Command(node, filepath.Join(dir, script))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s\n%s", out, stderr.String())
	return out
}
