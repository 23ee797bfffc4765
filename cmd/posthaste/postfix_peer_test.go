package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// postfixPeer is a throwaway Postfix that plays a recipient's MX: its
// smtpd on addr accepts mail for domain, and local delivery then fails
// for every mailbox (the error transport, "5.1.1 Mailbox does not
// exist"), so Postfix writes a real RFC 3464 DSN to the envelope sender
// and relays it to relay (our inbound MX). Everything lives in one
// temporary directory; the master runs in the foreground as this
// process's child and exits by itself after a few minutes should the test
// die first.
type postfixPeer struct {
	dir    string
	master *exec.Cmd
	exited chan struct{}
}

// postfixPeerUnavailable says why Postfix cannot play the peer here, or
// returns "".
func postfixPeerUnavailable() string {
	if _, err := exec.LookPath("postconf"); err != nil {
		return "postconf not found: install Debian's postfix package"
	}
	if _, err := user.Lookup("postfix"); err != nil {
		return "no user postfix: install Debian's postfix package"
	}
	if os.Geteuid() != 0 {
		return "a private Postfix instance must be started as root"
	}
	return ""
}

func startPostfixPeer(t *testing.T, addr, domain, relay string) *postfixPeer {
	t.Helper()
	out, err := exec.Command("postconf", "-d", "-h", "daemon_directory").Output()
	require.NoError(t, err)
	daemons := strings.TrimSpace(string(out))
	// Under os.TempDir(), not t.TempDir(): the postfix user must reach it.
	dir, err := os.MkdirTemp("", "posthaste-postfix-peer-")
	require.NoError(t, err)
	p := &postfixPeer{dir: dir, exited: make(chan struct{})}
	t.Cleanup(p.stop)
	require.NoError(t, os.Chmod(dir, 0o755))
	for _, sub := range []string{"etc", "queue", "data"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o755))
	}
	pu, err := user.Lookup("postfix")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(pu.Uid)
	require.NoError(t, os.Chown(filepath.Join(dir, "data"), uid, -1))
	relayHost, relayPort, err := net.SplitHostPort(relay)
	require.NoError(t, err)
	etc := filepath.Join(dir, "etc")
	var main bytes.Buffer
	for _, kv := range [][2]string{
		{"compatibility_level", "3.6"},
		{"config_directory", etc},
		{"queue_directory", filepath.Join(dir, "queue")},
		{"data_directory", filepath.Join(dir, "data")},
		{"mail_owner", "postfix"},
		{"setgid_group", "postdrop"},
		{"myhostname", "mx." + domain},
		{"mydomain", domain},
		{"myorigin", domain},
		{"mydestination", domain},
		{"mynetworks", "127.0.0.0/8"},
		// Only master.cf's address is listened on; "all" because
		// Postfix refuses an address that no interface carries by name
		// (127.0.0.4 is only lo's 127.0.0.0/8).
		{"inet_interfaces", "all"},
		{"inet_protocols", "ipv4"},
		{"smtpd_relay_restrictions", "permit_mynetworks, reject_unauth_destination"},
		// Every mailbox of domain is accepted at RCPT, then fails.
		{"local_recipient_maps", ""},
		{"smtpd_reject_unlisted_recipient", "no"},
		{"local_transport", "error:5.1.1 Mailbox does not exist"},
		{"alias_maps", ""},
		{"alias_database", ""},
		// Bounces go to our inbound MX, without DNS.
		{"default_transport", "smtp"},
		{"relayhost", "[" + relayHost + "]:" + relayPort},
		{"smtp_dns_support_level", "disabled"},
		{"smtp_tls_security_level", "none"},
		{"biff", "no"},
		{"maillog_file", filepath.Join(dir, "maillog")},
		{"maillog_file_prefixes", dir},
	} {
		fmt.Fprintf(&main, "%s = %s\n", kv[0], kv[1])
	}
	require.NoError(t, os.WriteFile(filepath.Join(etc, "main.cf"), main.Bytes(), 0o644))
	master := addr + ` inet n - n - - smtpd
cleanup   unix n - n - 0 cleanup
qmgr      unix n - n 300 1 qmgr
rewrite   unix - - n - - trivial-rewrite
bounce    unix - - n - 0 bounce
defer     unix - - n - 0 bounce
trace     unix - - n - 0 bounce
verify    unix - - n - 1 verify
flush     unix n - n - 0 flush
proxymap  unix - - n - - proxymap
showq     unix n - n - - showq
error     unix - - n - - error
retry     unix - - n - - error
smtp      unix - - n - - smtp
relay     unix - - n - - smtp
anvil     unix - - n - 1 anvil
scache    unix - - n - 1 scache
postlog   unix-dgram n - n - 1 postlogd
`
	require.NoError(t, os.WriteFile(filepath.Join(etc, "master.cf"), []byte(master), 0o644))
	if out, err := exec.Command("postfix", "-c", etc, "check").CombinedOutput(); err != nil {
		t.Fatalf("postfix check: %v: %s\n%s", err, out, p.log())
	}
	p.master = exec.Command(filepath.Join(daemons, "master"), "-c", etc, "-e", "600")
	p.master.Env = append(os.Environ(), "MAIL_CONFIG="+etc)
	require.NoError(t, p.master.Start())
	go func() { _ = p.master.Wait(); close(p.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("the Postfix master exited:\n%s", p.log())
		default:
		}
		require.True(t, time.Now().Before(deadline), "postfix not listening on %s:\n%s", addr, p.log())
		time.Sleep(50 * time.Millisecond)
	}
}

// log is the instance's log so far.
func (p *postfixPeer) log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "maillog"))
	return string(b)
}

// stop ends the master (SIGTERM, as `postfix stop` does) and removes the
// instance.
func (p *postfixPeer) stop() {
	if p.master != nil && p.master.Process != nil {
		select {
		case <-p.exited:
		default:
			if err := p.master.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				_ = p.master.Process.Kill()
			}
			select {
			case <-p.exited:
			case <-time.After(15 * time.Second):
				_ = p.master.Process.Kill()
				<-p.exited
			}
		}
	}
	_ = os.RemoveAll(p.dir)
}
