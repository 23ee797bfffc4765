package main

import (
	"bytes"
	"encoding/csv"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBroadcastTargets(t *testing.T) {
	res := broadcastResult{
		small: broadcastRun{n: 1000, sent: rate{n: 1000, elapsed: time.Second}, batches: 10, runs: 1, hwm: 400 << 20},
		large: broadcastRun{n: 10000, sent: rate{n: 10000, elapsed: 10 * time.Second}, batches: 100, runs: 2,
			hwm: 480 << 20},
		e2e: rate{n: 1000, elapsed: 3 * time.Second}, // 333.3/s
	}
	got := broadcastTargets(res)
	require.Len(t, got, 3)
	require.Equal(t, "broadcast 10000 / sandbox e2e >= 3.00", got[0].name)
	require.Equal(t, "3.00 (1000.0 vs 333.3 emails/s)", got[0].measured)
	require.Equal(t, "met", got[0].verdict(), "the bound is inclusive")
	require.Equal(t, "broadcast SendBatch starts / 100 emails <= 1.00", got[1].name)
	require.Equal(t, "1.00 (100 batches / 10000; 1.02 with the broadcast's 2 run(s))", got[1].measured)
	require.Equal(t, "met", got[1].verdict(), "the hand-off is one start per 100 emails")
	require.Equal(t, "broadcast peak memory 10000 / 1000 <= 1.20", got[2].name)
	require.Equal(t, "1.20 (480 vs 400 MB)", got[2].measured)
	require.Equal(t, "met", got[2].verdict(), "the bound is inclusive")

	res.large.batches = 101
	res.large.sent.elapsed = 11 * time.Second
	res.large.hwm = 481 << 20
	got = broadcastTargets(res)
	require.Equal(t, "not met", got[1].verdict(), "more than one SendBatch per 100 emails")
	require.Equal(t, "not met", got[0].verdict())
	require.Equal(t, "not met", got[2].verdict())

	got = broadcastTargets(broadcastResult{large: res.large})
	require.Equal(t, "skipped: no sandbox end-to-end run", got[0].verdict())
	require.Equal(t, "skipped: no peak memory of both sizes", got[2].verdict())
	got = broadcastTargets(broadcastResult{})
	for _, tg := range got {
		require.Contains(t, tg.verdict(), "skipped: ", tg.name)
	}
}

func TestBroadcastStartsPer100(t *testing.T) {
	b, all := broadcastRun{n: 1000, batches: 10, runs: 1}.startsPer100()
	require.InDelta(t, 1.0, b, 1e-9)
	require.InDelta(t, 1.1, all, 1e-9)
	b, all = broadcastRun{}.startsPer100()
	require.Zero(t, b)
	require.Zero(t, all)
	require.InDelta(t, 1.5, broadcastResult{small: broadcastRun{hwm: 2}, large: broadcastRun{hwm: 3}}.memoryRatio(), 1e-9)
	require.Zero(t, broadcastResult{large: broadcastRun{hwm: 3}}.memoryRatio())
}

func TestWriteBroadcastAudience(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, writeBroadcastAudience(&buf, 25))
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 26)
	require.Equal(t, []string{"email", "first_name"}, rows[0])
	require.Equal(t, []string{"delivered+0@posthaste.test", "Reader0"}, rows[1])
	require.Equal(t, []string{"delivered+9@posthaste.test", ""}, rows[10], "every tenth has no first name")
	require.Equal(t, []string{"delivered+24@posthaste.test", "Reader24"}, rows[25])
	seen := map[string]bool{}
	for _, r := range rows[1:] {
		require.False(t, seen[r[0]], r[0])
		seen[r[0]] = true
	}

	buf.Reset()
	require.NoError(t, writeBroadcastAudience(&buf, 0))
	require.Equal(t, "email,first_name\n", buf.String())
	require.Error(t, writeBroadcastAudience(&buf, -1))
}

func TestWriteBroadcastImportForm(t *testing.T) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	require.NoError(t, writeBroadcastImportForm(mw, 3, "seg-1"))
	_, params, err := mime.ParseMediaType(mw.FormDataContentType())
	require.NoError(t, err)
	mr := multipart.NewReader(&buf, params["boundary"])
	parts := map[string]string{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(part)
		require.NoError(t, err)
		parts[part.FormName()] = string(b)
	}
	require.Equal(t, `["seg-1"]`, parts["segments"])
	require.Equal(t, 4, strings.Count(parts["file"], "\n"))
	require.True(t, strings.HasPrefix(parts["file"], "email,first_name\ndelivered+0@posthaste.test,Reader0\n"))
}
