package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func requireLimitError(t *testing.T, err error, kind Kind, msg string) *Error {
	t.Helper()
	var e *Error
	require.True(t, errors.As(err, &e), "got %v", err)
	require.Equal(t, kind, e.Kind, e.Message)
	require.Contains(t, e.Message, msg)
	return e
}

// An email has at most MaxAttachments attachments, whether the request is
// decoded from JSON (where the count is refused before any element is
// decoded) or built in Go.
func TestAttachmentsPerEmailAreCapped(t *testing.T) {
	body := func(n int) []byte {
		atts := make([]string, n)
		for i := range atts {
			atts[i] = `{"content":"aGk=","filename":"a.txt"}`
		}
		return []byte(`{"from":"a@acme.com","to":"b@x.com","subject":"s","text":"t","attachments":[` +
			strings.Join(atts, ",") + `]}`)
	}
	r, err := DecodeSendRequest(body(MaxAttachments))
	require.NoError(t, err)
	_, err = r.Validate(context.Background(), ValidateOptions{Now: testNow})
	require.NoError(t, err)

	_, err = DecodeSendRequest(body(MaxAttachments + 1))
	e := requireLimitError(t, err, KindValidation, fmt.Sprintf(
		"Invalid `attachments` field. An email may have at most %d attachments; this request has %d.", MaxAttachments, MaxAttachments+1))
	require.Equal(t, "attachments", e.Field)

	r.Attachments = append(r.Attachments, AttachmentRequest{Content: Bytes("x"), Filename: "x.txt"})
	_, err = r.Validate(context.Background(), ValidateOptions{Now: testNow})
	requireLimitError(t, err, KindValidation, "at most 100 attachments; this request has 101")
}

// A body of millions of tiny array elements is counted, not kept: the
// refusal names the count.
func TestLongArraysAreRefusedWhileCounted(t *testing.T) {
	const n = 200_000
	many := "[" + strings.Repeat("{},", n-1) + "{}]"
	_, err := DecodeBatch([]byte(many))
	requireLimitError(t, err, KindValidation, fmt.Sprintf("A batch holds between 1 and 100 emails; this one has %d.", n))

	addrs := "[" + strings.Repeat(`"a@b.co",`, n-1) + `"a@b.co"]`
	_, err = DecodeSendRequest([]byte(`{"from":"a@acme.com","to":` + addrs + `}`))
	requireLimitError(t, err, KindValidation, fmt.Sprintf("Invalid `to` field. It holds %d addresses", n))

	_, err = DecodeSendRequest([]byte(`{"from":"a@acme.com","to":"b@x.com","tags":` + many + `}`))
	requireLimitError(t, err, KindValidation, fmt.Sprintf("At most 75 tags are allowed; this request has %d.", n))

	items, _ := json.Marshal(make([]struct{}, MaxBatch))
	got, err := DecodeBatch(items)
	require.NoError(t, err)
	require.Len(t, got, MaxBatch)
}

// Each path fetch may bring only what the message still has room for, so
// that a request never holds much more than the 40 MB limit; what does not
// fit is refused as too large.
func TestPathFetchesShareTheMessageBudget(t *testing.T) {
	r := minimal()
	r.Attachments = []AttachmentRequest{
		{Content: make(Bytes, 20<<20), Filename: "big.bin"},
		{Path: "https://x.com/fits.bin"},
		{Path: "https://x.com/too-big.bin"},
	}
	f := &fakeFetcher{bodies: map[string]fakeBody{
		"https://x.com/fits.bin":    {body: make([]byte, 5<<20)},
		"https://x.com/too-big.bin": {body: make([]byte, 6<<20)},
	}}
	_, err := r.Validate(context.Background(), ValidateOptions{Now: testNow, Fetch: f})
	requireLimitError(t, err, KindTooLarge, "The email is too large: `attachments[2].path` is larger than the ")
	require.Len(t, f.limits, 2)
	// 20 MB of content is about 27.4 MB of message (base64 in lines of
	// 76): about 9.2 MB of content fits in what is left, then 4.2 MB.
	require.InDelta(t, 9.2, float64(f.limits[0])/(1<<20), 0.1, "the first fetch gets what is left")
	require.InDelta(t, 4.2, float64(f.limits[1])/(1<<20), 0.1, "the second what the first left")

	// What fits is accepted, and the built estimate stays within the limit.
	r.Attachments = r.Attachments[:2]
	e, err := r.Validate(context.Background(), ValidateOptions{Now: testNow, Fetch: f})
	require.NoError(t, err)
	require.LessOrEqual(t, estimateSize(&e), int64(MaxMessageSize))
}

func TestDecodedRoom(t *testing.T) {
	for _, room := range []int64{-5, 0, 1, 2, 3, 6, 77, 78, 79, 80, 81, 82, 156, 1000, 40 << 20} {
		n := decodedRoom(room)
		if room <= 0 {
			require.Zero(t, n)
			continue
		}
		require.LessOrEqual(t, encodedLen(int(n)), room, "room %d", room)
		require.Greater(t, encodedLen(int(n)+3), room, "room %d: the largest that fits, to a base64 quantum", room)
	}
}

// blockingFetcher answers only when its context ends.
type blockingFetcher struct{ calls int }

func (b *blockingFetcher) Fetch(ctx context.Context, url string, _ int64) ([]byte, string, error) {
	b.calls++
	<-ctx.Done()
	return nil, "", fmt.Errorf("egress: GET %s: timed out", url)
}

// All path fetches of a request share one deadline: many slow URLs cannot
// hold a request for their count times the fetch timeout.
func TestPathFetchesShareOneDeadline(t *testing.T) {
	r := minimal()
	for i := range 10 {
		r.Attachments = append(r.Attachments, AttachmentRequest{Path: fmt.Sprintf("https://slow.example/%d.pdf", i)})
	}
	f := &blockingFetcher{}
	_, err := r.Validate(context.Background(), ValidateOptions{Now: testNow, Fetch: f, FetchTime: 20 * time.Millisecond})
	e := requireLimitError(t, err, KindInvalidAttachment,
		"Invalid `attachments[0].path` field. Fetching the attachments of one email may take at most 20ms in all")
	require.Equal(t, "attachments[0].path", e.Field)
	require.Equal(t, 1, f.calls, "the deadline ends the request, not one fetch")
}
