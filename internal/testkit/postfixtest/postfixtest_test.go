package postfixtest

import (
	"context"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// start starts an instance for postfixtest.test that discards all its
// mail, after edit changes its configuration, and stops it when the test
// ends. It fails the test when this machine cannot run a throwaway
// Postfix, saying what is missing.
func start(t *testing.T, edit func(*Config)) *Instance {
	t.Helper()
	Require(t)
	cfg := Config{
		Domain: "postfixtest.test",
		Main: map[string]string{
			"default_transport": "discard",
			"local_transport":   "discard",
			"relay_transport":   "discard",
		},
		Services: []string{"discard unix - - n - - discard"},
	}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	in, err := Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, in.Stop()) })
	return in
}

// TestInstance starts an instance, sends it one message with net/smtp,
// waits for its log to show the message queued and removed (discarded),
// and checks that Stop ends the master and its daemons, frees the port
// and removes the directory, and that a second Stop is a no-op.
func TestInstance(t *testing.T) {
	in := start(t, nil)
	main, err := os.ReadFile(filepath.Join(in.Dir(), "etc", "main.cf"))
	require.NoError(t, err)
	require.Contains(t, string(main), "\nmydestination = postfixtest.test\n")

	require.NoError(t, smtp.SendMail(in.Addr(), nil, "sender@example.test", []string{"rcpt@postfixtest.test"},
		[]byte("Subject: one\r\n\r\nbody\r\n")))
	c, err := in.WaitRemoved(t.Context(), 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, Counts{Removed: 1}, c)
	require.Regexp(t, `postfix/discard\[\d+\]: \w+: to=<rcpt@postfixtest\.test>, .*status=sent`, in.Log())
	require.NotEmpty(t, in.Tail(1))
	require.NotContains(t, in.Tail(1), "\n")

	require.NoError(t, in.Stop())
	require.False(t, groupRuns(in.master.Process.Pid), "a daemon still runs after Stop")
	select {
	case <-in.Done():
	default:
		t.Fatal("the master is still running after Stop")
	}
	_, err = os.Stat(in.Dir())
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = net.DialTimeout("tcp", in.Addr(), time.Second)
	require.Error(t, err, "nothing listens after Stop")
	require.NoError(t, in.Stop(), "a second Stop is a no-op")
}

// TestRejected counts a command the instance's smtpd rejects: a
// recipient outside its domain from a client outside mynetworks is
// relaying, refused by reject_unauth_destination.
func TestRejected(t *testing.T) {
	in := start(t, func(cfg *Config) { cfg.Main["mynetworks"] = "192.0.2.0/24" })

	c, err := smtp.Dial(in.Addr())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Mail("sender@example.test"))
	err = c.Rcpt("someone@elsewhere.test")
	var te *textproto.Error
	require.ErrorAs(t, err, &te)
	require.Equal(t, 554, te.Code)
	require.Contains(t, te.Msg, "5.7.1 <someone@elsewhere.test>: Relay access denied")
	require.NoError(t, c.Quit())
	require.Eventually(t, func() bool {
		n, err := in.ReadLog()
		return err == nil && n.Rejected == 1
	}, time.Minute, 50*time.Millisecond, "the rejection is counted:\n%s", in.Tail(10))
}

// TestLifetime checks that an instance nobody stops ends by itself after
// its lifetime, as one would whose process was killed.
func TestLifetime(t *testing.T) {
	in := start(t, func(cfg *Config) { cfg.Lifetime = 3 * time.Second })
	select {
	case <-in.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("the master still runs past its lifetime")
	}
	require.NoError(t, in.Err(), "the master's own exit is a clean one")
	// Its daemons exit at their convenience: an smtpd may still hold the
	// listening socket a moment.
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", in.Addr(), time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	}, time.Minute, 50*time.Millisecond, "the port still accepts connections")
}

// TestMainCF checks how Config.Main combines with the defaults: a default
// is replaced in place, so that no parameter is set twice, and the others
// follow in key order.
func TestMainCF(t *testing.T) {
	for _, tc := range []struct {
		name string
		host string
		main map[string]string
		want []string // lines in this order
	}{
		{"defaults", "127.0.0.1", nil, []string{
			"myhostname = postfix.a.test", "mydestination = a.test", "inet_interfaces = loopback-only"}},
		{"another loopback address", "127.0.0.4", nil, []string{"inet_interfaces = all"}},
		{"override and add", "127.0.0.1",
			map[string]string{"relayhost": "[127.0.0.1]:25", "myhostname": "mx.a.test", "biff": "yes"},
			[]string{"myhostname = mx.a.test", "biff = yes", "maillog_file_prefixes = /d", "relayhost = [127.0.0.1]:25"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(mainCF("/d", tc.host, Config{Domain: "a.test", Main: tc.main}))
			seen := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(got), "\n")[1:] {
				k, _, ok := strings.Cut(line, " = ")
				require.True(t, ok, line)
				require.False(t, seen[k], "%s set twice:\n%s", k, got)
				seen[k] = true
			}
			at := -1
			for _, w := range tc.want {
				i := strings.Index(got, "\n"+w+"\n")
				require.Greater(t, i, at, "%q after the previous lines in:\n%s", w, got)
				at = i
			}
		})
	}
}

// TestMasterCF checks that Config.Services follow the base services.
func TestMasterCF(t *testing.T) {
	got := string(masterCF("127.0.0.4:2525", []string{"discard unix - - n - - discard"}))
	require.True(t, strings.HasPrefix(got, "# service type"), got)
	require.Contains(t, got, "\n127.0.0.4:2525 inet n - n - - smtpd\n")
	require.True(t, strings.HasSuffix(got, "postlogd\ndiscard unix - - n - - discard\n"), got)
}

// TestGroupRuns checks the process-group probe Stop waits on: this
// process's group runs, a group without processes does not.
func TestGroupRuns(t *testing.T) {
	require.True(t, groupRuns(syscall.Getpgrp()))
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Run())
	require.False(t, groupRuns(cmd.Process.Pid), "the group of an exited, reaped process")
}
