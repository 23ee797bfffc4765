package main

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// TestDevTemplateSend: a published template sent through the public API
// arrives at the recipient's MX rendered (the values escaped in the HTML
// part, as given in the text part and subject), rendered once at
// acceptance: republishing after the send does not change what arrives.
func TestDevTemplateSend(t *testing.T) {
	dns, mx := memberMX(t)
	env := devEnv(t, pgtest.NewDatabase(t), dns, mx)
	dataDir := env["POSTHASTE_DATA_DIR"]
	dev := startDev(t, env)
	c := apiClient{t: t, base: dev.base, key: readCredentials(t, dataDir).APIKey}

	status, created := c.do("POST", "/templates", map[string]any{
		"name":    "Receipt",
		"alias":   "receipt",
		"from":    "Shop <onboarding@posthaste.test>",
		"subject": "Receipt for {{{PRODUCT}}}",
		"html":    "<p>{{{PRODUCT}}} costs {{{PRICE}}} ({{{EMAIL}}})</p>",
		"text":    "{{{PRODUCT}}} costs {{{PRICE}}}",
		"variables": []map[string]any{
			{"key": "PRODUCT", "type": "string"},
			{"key": "PRICE", "type": "number", "fallback_value": 1},
		},
	})
	require.Equal(t, 201, status, created)
	status, body := c.do("POST", "/templates/receipt/publish", nil)
	require.Equal(t, 200, status, body)

	id := c.send(map[string]any{"to": "owner@member.test",
		"template": map[string]any{"id": "receipt", "variables": map[string]any{"PRODUCT": "Fish & <Chips>", "PRICE": 9.5}}})
	status, body = c.do("PATCH", "/templates/receipt", map[string]any{"html": "<p>changed</p>", "text": "changed"})
	require.Equal(t, 200, status, body)
	status, body = c.do("POST", "/templates/receipt/publish", nil)
	require.Equal(t, 200, status, body)
	c.waitFor(id, map[string]string{"owner@member.test": "delivered"})

	msgs := mx.WaitMessages(t, 1, 30*time.Second)
	mr, err := mail.CreateReader(bytes.NewReader(msgs[0].Data))
	require.NoError(t, err)
	subject, err := mr.Header.Subject()
	require.NoError(t, err)
	require.Equal(t, "Receipt for Fish & <Chips>", subject)
	parts := map[string]string{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		ct, _, _ := p.Header.(*mail.InlineHeader).ContentType()
		b, err := io.ReadAll(p.Body)
		require.NoError(t, err)
		parts[ct] = string(b)
	}
	require.Contains(t, parts["text/html"], "<p>Fish &amp; &lt;Chips&gt; costs 9.5 (owner@member.test)</p>")
	require.Contains(t, parts["text/plain"], "Fish & <Chips> costs 9.5")
}
