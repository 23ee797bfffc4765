package smtptest

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"
)

const msg = "Subject: hi\r\n\r\nhello\r\n"

func dial(t *testing.T, s *Server) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(s.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Hello("client.test"))
	return c
}

func TestPlainDelivery(t *testing.T) {
	s := NewServer(t, Options{})
	c := dial(t, s)
	ok, _ := c.Extension("STARTTLS")
	require.False(t, ok)
	ok, _ = c.Extension("PIPELINING")
	require.True(t, ok)

	require.NoError(t, c.SendMail("a@x.test", []string{"b@y.test", "c@y.test"}, strings.NewReader(msg)))
	msgs := s.WaitMessages(t, 1, 5*time.Second)
	require.Equal(t, "a@x.test", msgs[0].From)
	require.Equal(t, []string{"b@y.test", "c@y.test"}, msgs[0].To)
	require.Equal(t, msg, string(msgs[0].Data))
	require.False(t, msgs[0].TLS)
	require.Equal(t, "client.test", msgs[0].Helo)
	require.Equal(t, 1, s.Connections())
	require.Equal(t, 1, s.MailCommands())
}

func TestSTARTTLS(t *testing.T) {
	s := NewServer(t, Options{STARTTLS: true, CertHosts: []string{"mx.example.test"}})
	c := dial(t, s)
	ok, _ := c.Extension("STARTTLS")
	require.True(t, ok)
	require.NoError(t, c.Quit())

	tc, err := smtp.DialStartTLS(s.Addr(), &tls.Config{ServerName: "mx.example.test", RootCAs: s.CertPool()})
	require.NoError(t, err)
	defer tc.Close()
	require.NoError(t, tc.SendMail("a@x.test", []string{"b@y.test"}, strings.NewReader(msg)))
	require.True(t, s.WaitMessages(t, 1, 5*time.Second)[0].TLS)
}

func TestHooks(t *testing.T) {
	s := NewServer(t, Options{
		Rcpt: func(rcpt string, n int) error {
			switch {
			case rcpt == "grey@y.test" && n == 1:
				return Reply(451, "4.7.1 greylisted")
			case rcpt == "gone@y.test":
				return Reply(550, "5.1.1 no such user")
			}
			return nil
		},
		Data: func(_ []string, n int) error {
			if n == 1 {
				return Reply(554, "rejected")
			}
			return nil
		},
	})
	c := dial(t, s)
	require.NoError(t, c.Mail("a@x.test", nil))
	var smtpErr *smtp.SMTPError
	require.ErrorAs(t, c.Rcpt("grey@y.test", nil), &smtpErr)
	require.Equal(t, 451, smtpErr.Code)
	require.Equal(t, smtp.EnhancedCode{4, 7, 1}, smtpErr.EnhancedCode)
	require.ErrorAs(t, c.Rcpt("gone@y.test", nil), &smtpErr)
	require.Equal(t, 550, smtpErr.Code)
	require.NoError(t, c.Rcpt("grey@y.test", nil))

	w, err := c.Data()
	require.NoError(t, err)
	_, _ = w.Write([]byte(msg))
	require.ErrorAs(t, w.Close(), &smtpErr)
	require.Equal(t, 554, smtpErr.Code)
	require.Empty(t, s.Messages())

	require.NoError(t, c.SendMail("a@x.test", []string{"grey@y.test"}, strings.NewReader(msg)))
	require.Len(t, s.WaitMessages(t, 1, 5*time.Second), 1)
}

func TestDropData(t *testing.T) {
	s := NewServer(t, Options{DropData: func(n int) bool { return n == 1 }})
	c := dial(t, s)
	err := c.SendMail("a@x.test", []string{"b@y.test"}, strings.NewReader(msg+strings.Repeat("x", 1<<16)))
	require.Error(t, err)
	var smtpErr *smtp.SMTPError
	require.False(t, errors.As(err, &smtpErr), "the connection drops without a reply: %v", err)

	c2 := dial(t, s)
	require.NoError(t, c2.SendMail("a@x.test", []string{"b@y.test"}, strings.NewReader(msg)))
	require.Len(t, s.WaitMessages(t, 1, 5*time.Second), 1)
}

func TestNoPipeliningAndCloseConnections(t *testing.T) {
	s := NewServer(t, Options{NoPipelining: true, MaxMessageBytes: 1000, SMTPUTF8: true})
	c := dial(t, s)
	ok, _ := c.Extension("PIPELINING")
	require.False(t, ok)
	size, ok := c.MaxMessageSize()
	require.True(t, ok)
	require.Equal(t, 1000, size)
	ok, _ = c.Extension("SMTPUTF8")
	require.True(t, ok)

	s.CloseConnections()
	require.Error(t, c.Noop())
	require.Equal(t, 1, s.Connections())
}

func TestSecondAddressSamePort(t *testing.T) {
	first := NewServer(t, Options{})
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.3", "0"))
	if err != nil {
		t.Fatalf("this test needs 127.0.0.0/8 on loopback: %v", err)
	}
	_ = ln.Close()
	second := NewServer(t, Options{Addr: net.JoinHostPort("127.0.0.3", first.Addr()[strings.LastIndex(first.Addr(), ":")+1:])})
	require.Equal(t, first.Port(), second.Port())
}

func TestReply(t *testing.T) {
	for _, tc := range []struct {
		code int
		text string
		want smtp.SMTPError
	}{
		{451, "4.7.1 greylisted", smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "greylisted"}},
		{550, "no such user", smtp.SMTPError{Code: 550, EnhancedCode: smtp.NoEnhancedCode, Message: "no such user"}},
		{550, "5.1 short", smtp.SMTPError{Code: 550, EnhancedCode: smtp.NoEnhancedCode, Message: "5.1 short"}},
	} {
		require.Equal(t, tc.want, *Reply(tc.code, tc.text))
	}
}
