package mime

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nested is a message whose text part sits depth multiparts deep, with pad
// bytes of padding in a part before it.
func nested(depth, pad int) []byte {
	var b strings.Builder
	b.WriteString("From: a@example.test\r\nMIME-Version: 1.0\r\n")
	for i := range depth {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n", i, i)
	}
	if pad > 0 {
		b.WriteString("Content-Type: application/octet-stream\r\n\r\n" + strings.Repeat("x", pad) +
			fmt.Sprintf("\r\n--b%d\r\n", depth-1))
	}
	b.WriteString("Content-Type: text/plain\r\n\r\nDeep\r\n")
	for i := depth - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%d--\r\n", i)
	}
	return []byte(b.String())
}

func TestParseSubmissionBoundsNesting(t *testing.T) {
	s, err := ParseSubmission(nested(MaxNesting, 0))
	require.NoError(t, err)
	require.Equal(t, "Deep", *s.Text)

	for _, depth := range []int{MaxNesting + 1, 100_000} {
		_, err = ParseSubmission(nested(depth, 0))
		require.ErrorIs(t, err, ErrTooDeep, "depth %d", depth)
		require.NotErrorIs(t, err, ErrMalformed)
	}
	// Messages too large to look for their bodies are walked all the same.
	_, err = ParseSubmission(nested(MaxNesting+1, maxPartScan))
	require.ErrorIs(t, err, ErrTooDeep)
	s, err = ParseSubmission(nested(3, maxPartScan))
	require.NoError(t, err)
	require.Nil(t, s.Text, "not looked for")
}

func TestParseSubmissionResentFields(t *testing.T) {
	s, err := ParseSubmission([]byte("Resent-From: Desk <desk@example.test>\r\nResent-Sender: ops@example.test\r\n" +
		"Resent-From: a@example.test, b@example.test\r\nSender: s@example.test\r\nFrom: f@example.test\r\n\r\nBody\r\n"))
	require.NoError(t, err)
	require.Equal(t, []Address{{Name: "Desk", Addr: "desk@example.test"}, {Addr: "a@example.test"}, {Addr: "b@example.test"}}, s.ResentFrom)
	require.Equal(t, []Address{{Addr: "ops@example.test"}}, s.ResentSender)
	require.Equal(t, &Address{Addr: "s@example.test"}, s.Sender)

	for _, field := range []string{"Resent-From: not an address", "Resent-Sender:"} {
		_, err := ParseSubmission([]byte(field + "\r\nFrom: f@example.test\r\n\r\nBody\r\n"))
		require.ErrorIs(t, err, ErrMalformed, field)
	}
}
