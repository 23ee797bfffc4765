package mxlisten

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Real SMTP clients as inbound senders: Debian's swaks and Python's
// smtplib, over STARTTLS, each also trying to relay to a foreign address.

// TestSwaksSends needs swaks with Net::SSLeay (scripts/setup.sh installs
// both: apt-get install swaks libnet-ssleay-perl). Without swaks it fails,
// saying what to install.
func TestSwaksSends(t *testing.T) {
	if _, err := exec.LookPath("swaks"); err != nil {
		t.Fatal("swaks is not installed: apt-get install -y swaks libnet-ssleay-perl (./test.sh installs both)")
	}
	h := newHarness(t, options{})
	h.dns.AddTXT("sender.example", "v=spf1 ip4:127.0.0.1 -all")

	out, err := exec.Command("swaks", "--timeout", "30", "--server", h.addr, "--tls", "--helo", "mx.sender.example",
		"--from", "peer@sender.example", "--to", receiving,
		"--header", "Subject: Sent with swaks", "--body", "Body from swaks").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `<~  250 2\.0\.0 Ok: queued as [0-9a-f-]{36}`, string(out))
	got := h.acc.accepted()
	require.Len(t, got, 1)
	require.True(t, got[0].TLS)
	require.Equal(t, "peer@sender.example", got[0].MailFrom)
	require.Equal(t, "pass", got[0].Auth.SPF.Result)
	require.Contains(t, string(got[0].Data), "\r\nSubject: Sent with swaks\r\n")
	require.Contains(t, string(got[0].Data), "\r\n\r\nBody from swaks")

	// An open relay attempt: refused at RCPT, nothing accepted.
	out, err = exec.Command("swaks", "--timeout", "30", "--server", h.addr, "--tls", "--helo", "mx.sender.example",
		"--from", "peer@sender.example", "--to", "victim@example.org").CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Regexp(t, `<[~*]\* 550 5\.1\.1 Recipient address rejected`, string(out))
	require.Len(t, h.acc.accepted(), 1)
}

const pythonSend = `
import smtplib, ssl, sys
port, cafile = int(sys.argv[1]), sys.argv[2]
msg = (b"From: Peer <peer@sender.example>\r\nTo: support@ours.example\r\n"
       b"Subject: Sent with smtplib\r\n\r\nBody from smtplib\r\n")
with smtplib.SMTP("127.0.0.1", port, local_hostname="py.sender.example", timeout=30) as s:
    s.starttls(context=ssl.create_default_context(cafile=cafile))
    s.ehlo("py.sender.example")
    try:
        s.sendmail("peer@sender.example", ["victim@example.org"], msg)
        print("relayed")
    except smtplib.SMTPRecipientsRefused as e:
        code, text = e.recipients["victim@example.org"]
        print("refused", code, text.decode())
    s.rset()
    refused = s.sendmail("", ["support@ours.example", "nobody@example.net"], msg)
    print("sent", sorted(refused))
`

// TestPythonSmtplibSends runs Debian's /usr/bin/python3.
func TestPythonSmtplibSends(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Fatal("Debian's /usr/bin/python3 is absent: apt-get install -y python3 (./test.sh installs it)")
	}
	h := newHarness(t, options{})
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, h.certPEM, 0o600))
	_, port, _ := strings.Cut(h.addr, ":")

	out, err := exec.Command("/usr/bin/python3", "-c", pythonSend, port, ca).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, regexp.MustCompile(`(?m)^refused 550 5\.1\.1 `), string(out))
	require.Contains(t, string(out), "sent ['nobody@example.net']")
	got := h.acc.accepted()
	require.Len(t, got, 1)
	require.Equal(t, "", got[0].MailFrom, "the null sender")
	require.True(t, got[0].TLS)
	require.Equal(t, []string{receiving}, []string{got[0].Recipients[0].Address})
	require.Len(t, got[0].Recipients, 1)
	require.Contains(t, string(got[0].Data), "\r\nSubject: Sent with smtplib\r\n")
}
