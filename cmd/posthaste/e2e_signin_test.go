package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// devChild is `posthaste dev` in a process of its own, so that its memory
// can be read from /proc.
type devChild struct {
	cmd  *exec.Cmd
	base string
}

// startDevChild starts `posthaste dev` as a child process and waits until
// it is ready; spawn kills it at cleanup.
func startDevChild(t *testing.T, env map[string]string) *devChild {
	t.Helper()
	smtpListen(t, env)
	return &devChild{cmd: spawn(t, env, "dev", `"msg":"ready"`), base: "http://" + env["POSTHASTE_HTTP_ADDR"]}
}

// memory reads a size field of /proc/<pid>/status (VmRSS, VmHWM) in bytes.
func (d *devChild) memory(field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, d.cmd.Process.Pid)
}

// clientFrom is an HTTP client whose connections come from source, an
// address of the loopback interface (all of 127.0.0.0/8 is).
func clientFrom(source string, jar http.CookieJar) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 10 * time.Second}
	return &http.Client{
		Jar:           jar,
		Timeout:       60 * time.Second,
		Transport:     &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 8},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// badSignIn posts a sign-in with a wrong password, with a CSRF token of its
// own making (the form's token is a double submit: field and cookie
// agree), and returns the status and whether a 503 carried Retry-After.
func badSignIn(c *http.Client, base, email string) (int, bool, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/dashboard/login", strings.NewReader(url.Values{
		"csrf": {"flood"}, "email": {email}, "password": {"not-the-password"}}.Encode()))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "posthaste_login_csrf", Value: "flood"})
	res, err := c.Do(req)
	if err != nil {
		return 0, false, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header.Get("Retry-After") != "", nil
}

// TestSignInFlood is issue 14's reproduction turned into a bound: 200
// parallel sign-ins with wrong passwords took `posthaste dev` from 287 MB
// to 13.3 GB resident, each one a 64 MiB argon2id hash. Here 1,000 go at
// once from 200 loopback addresses, and a correct sign-in from another
// address starts when half of them have been answered. The process stays
// under 1 GiB resident at its peak (VmHWM), the correct sign-in gets
// through, and the refused attempts are answered 503 with Retry-After (or
// 429 by a throttle) instead of waiting for memory. A watchdog kills the
// process as soon as it passes the bound, so that a build without one
// fails here instead of exhausting the machine.
func TestSignInFlood(t *testing.T) {
	const (
		attempts  = 1000
		addresses = 200
		bound     = 1 << 30
	)
	env := dbDevEnv(t, pgtest.NewDatabase(t))
	dev := startDevChild(t, env)
	creds := readCredentials(t, env["POSTHASTE_DATA_DIR"])
	before, err := dev.memory("VmRSS")
	require.NoError(t, err)

	var over atomic.Int64
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-tick.C:
			}
			if rss, err := dev.memory("VmRSS"); err == nil && rss > bound {
				over.Store(rss)
				_ = dev.cmd.Process.Kill()
				return
			}
		}
	}()

	clients := make([]*http.Client, addresses)
	for i := range clients {
		clients[i] = clientFrom(fmt.Sprintf("127.0.0.%d", 2+i), nil)
	}
	type outcome struct {
		status     int
		retryAfter bool
		err        error
	}
	outcomes := make(chan outcome, attempts)
	start := make(chan struct{})
	for i := range attempts {
		go func() {
			<-start
			status, retry, err := badSignIn(clients[i%addresses], dev.base, fmt.Sprintf("guess-%d@member.test", i%100))
			outcomes <- outcome{status, retry, err}
		}()
	}

	// The correct sign-in, from an address of its own, as a browser does
	// it: the form, then the post.
	type signIn struct {
		status   int
		location string
		err      error
	}
	owner := make(chan signIn, 1)
	signInOwner := func() {
		jar, err := cookiejar.New(nil)
		if err != nil {
			owner <- signIn{err: err}
			return
		}
		c := clientFrom("127.0.1.1", jar)
		res, err := c.Get(dev.base + "/dashboard/login")
		if err != nil {
			owner <- signIn{err: err}
			return
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		m := formCSRF.FindStringSubmatch(string(page))
		if m == nil {
			owner <- signIn{err: fmt.Errorf("no csrf field in the sign-in page (%d)", res.StatusCode)}
			return
		}
		res, err = c.PostForm(dev.base+"/dashboard/login", url.Values{"csrf": {m[1]}, "email": {creds.Email}, "password": {creds.Password}})
		if err != nil {
			owner <- signIn{err: err}
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		owner <- signIn{status: res.StatusCode, location: res.Header.Get("Location")}
	}

	close(start)
	counts := map[int]int{}
	var failed []error
	silent := 0 // refusals without Retry-After
	for i := range attempts {
		o := <-outcomes
		if o.err != nil {
			failed = append(failed, o.err)
		}
		counts[o.status]++
		if (o.status == http.StatusServiceUnavailable || o.status == http.StatusTooManyRequests) && !o.retryAfter {
			silent++
		}
		if i == attempts/2 {
			go signInOwner()
		}
	}
	got := <-owner
	stopWatch()
	<-watched
	require.Zero(t, over.Load(), "resident memory passed 1 GiB (the process was killed); statuses %v", counts)
	require.Empty(t, failed, "every attempt is answered")
	require.Zero(t, silent, "a refusal says when to come back")
	peak, err := dev.memory("VmHWM")
	require.NoError(t, err)
	t.Logf("statuses %v; resident before %d MiB, peak %d MiB", counts, before>>20, peak>>20)
	require.Less(t, peak, int64(bound), "peak resident memory")

	require.NoError(t, got.err)
	require.Equal(t, http.StatusSeeOther, got.status, "the correct sign-in gets through the flood")
	require.Equal(t, "/dashboard/emails", got.location)
	for status := range counts {
		require.Contains(t, []int{http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable}, status)
	}
	require.Positive(t, counts[http.StatusUnauthorized], "some attempts were checked")
}
