package dashboard_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/password"
	"github.com/posthaste/posthaste/internal/testkit/clocktest"
)

// withPasswords gives the fixture a password pool of its own, at the
// default cost unless cfg sets one; the teams' owners are hashed in it.
func withPasswords(cfg password.PoolConfig) func(*dashboard.Config) {
	return func(c *dashboard.Config) { c.Passwords = password.NewPool(cfg) }
}

// attempt is the answer to one form post made off the test's goroutine.
type attempt struct {
	status     int
	retryAfter string
	body       string
	err        error
}

// postRaw posts a form without require, for goroutines; headers are added
// to the request.
func postRaw(c *http.Client, u string, form url.Values, headers map[string]string) attempt {
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return attempt{err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		return attempt{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return attempt{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After"), body: string(b), err: err}
}

// signInForm opens the sign-in page in c and returns a form for email and
// pw with the page's CSRF token.
func (f *fixture) signInForm(c *http.Client, email, pw string) url.Values {
	f.t.Helper()
	_, page := get(f.t, c, f.srv.URL+"/dashboard/login")
	return url.Values{"csrf": {csrf(f.t, page)}, "email": {email}, "password": {pw}}
}

// parallel posts form n times at once from c and counts the statuses.
// Every attempt carries the cookies c holds when it starts: an answer that
// renews a cookie (each render of the sign-in page renews its form's CSRF
// cookie) must not reach the attempts still being sent, or they would
// fail on a token that no longer matches instead of testing the throttle.
func (f *fixture) parallel(n int, c *http.Client, path string, form url.Values, headers map[string]string) map[int]int {
	f.t.Helper()
	u, err := url.Parse(f.srv.URL + path)
	require.NoError(f.t, err)
	hdr := map[string]string{}
	for k, v := range headers {
		hdr[k] = v
	}
	if c.Jar != nil {
		var cookies []string
		for _, ck := range c.Jar.Cookies(u) {
			cookies = append(cookies, ck.Name+"="+ck.Value)
		}
		hdr["Cookie"] = strings.Join(cookies, "; ")
	}
	fixed := *c
	fixed.Jar = nil
	answers := make(chan attempt, n)
	for range n {
		go func() { answers <- postRaw(&fixed, u.String(), form, hdr) }()
	}
	counts := map[int]int{}
	for range n {
		a := <-answers
		require.NoError(f.t, a.err)
		counts[a.status]++
		if a.status == http.StatusTooManyRequests {
			require.NotEmpty(f.t, a.retryAfter, "a 429 says when to come back")
		}
	}
	return counts
}

// Sign-in attempts used to be counted after their hash, so parallel ones
// all ran: the throttle saw the first failure only when every guess had
// been checked.
func TestSignInAttemptsCountBeforeTheHash(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withPasswords(password.PoolConfig{Wait: time.Minute}))
	c := f.browser()
	counts := f.parallel(20, c, "/dashboard/login", f.signInForm(c, f.a.Email, "wrong"), nil)
	require.Equal(t, map[int]int{http.StatusUnauthorized: 5, http.StatusTooManyRequests: 15}, counts)
	res, page := f.login(c, f.a.Email, f.a.Password)
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "even the right password waits")
	require.Contains(t, page, "Too many failed sign-in attempts")
	require.NotEmpty(t, res.Header.Get("Retry-After"))

	// An address without an account is throttled alike: no oracle.
	counts = f.parallel(20, c, "/dashboard/login", f.signInForm(c, "nobody@example.com", "wrong"), nil)
	require.Equal(t, map[int]int{http.StatusUnauthorized: 5, http.StatusTooManyRequests: 15}, counts)

	res, _ = f.login(c, f.b.Email, f.b.Password)
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "other accounts are not locked out")
}

// Behind a reverse proxy every client has the proxy's address: the
// throttles locked out everyone behind it, or no one.
func TestThrottlesHonourTrustedProxies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *dashboard.Config) { c.TrustedProxies = []string{"127.0.0.1"} })
	from := func(addr string) map[string]string { return map[string]string{"X-Forwarded-For": addr} }
	c := f.browser()
	for range 5 {
		a := postRaw(c, f.srv.URL+"/dashboard/login", f.signInForm(c, f.a.Email, "wrong"), from("198.51.100.1"))
		require.NoError(t, a.err)
		require.Equal(t, http.StatusUnauthorized, a.status)
	}
	a := postRaw(c, f.srv.URL+"/dashboard/login", f.signInForm(c, f.a.Email, f.a.Password), from("198.51.100.1"))
	require.Equal(t, http.StatusTooManyRequests, a.status, "the guessing client waits")
	a = postRaw(c, f.srv.URL+"/dashboard/login", f.signInForm(c, f.a.Email, f.a.Password), from("198.51.100.2"))
	require.Equal(t, http.StatusSeeOther, a.status, "another client behind the proxy does not")

	// A client cannot pick its address when the proxy is not trusted.
	f = newFixture(t)
	c = f.browser()
	for range 5 {
		a := postRaw(c, f.srv.URL+"/dashboard/login", f.signInForm(c, f.a.Email, "wrong"), from("198.51.100.1"))
		require.Equal(t, http.StatusUnauthorized, a.status)
	}
	a = postRaw(c, f.srv.URL+"/dashboard/login", f.signInForm(c, f.a.Email, f.a.Password), from("198.51.100.2"))
	require.Equal(t, http.StatusTooManyRequests, a.status)
}

// The other forms shown before sign-in that do work (a password hash, a
// call to an identity provider) share a budget per client address.
func TestAnonymousEndpointsThrottlePerAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	for i := range 30 {
		res, _ := post(t, c, f.srv.URL+"/dashboard/reset/not-a-token", url.Values{})
		require.Equal(t, http.StatusNotFound, res.StatusCode, "attempt %d", i)
	}
	for _, path := range []string{"/dashboard/reset/not-a-token", "/dashboard/invite/not-a-token"} {
		res, page := post(t, c, f.srv.URL+path, url.Values{})
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode, path)
		require.Contains(t, page, "Too many attempts")
		require.NotEmpty(t, res.Header.Get("Retry-After"))
	}
	for _, path := range []string{"/dashboard/oauth/google/start", "/dashboard/oauth/google/callback?state=x"} {
		res, _ := get(t, c, f.srv.URL+path)
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode, path)
	}
	res, page := f.login(c, f.a.Email, f.a.Password)
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, page)
}

// clientFrom is a browser whose connections come from source, one of the
// loopback interface's addresses (all of 127.0.0.0/8).
func clientFrom(t *testing.T, source string) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	return &http.Client{Jar: jar, Transport: &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// A flood of sign-ins from many addresses fills the password pool; a
// sign-in from an address that is not part of it goes ahead of the
// flood's queue and gets through, while the flood is refused with 503.
// Its pool hashes at the production cost, so that the flood's first
// attempts still wait when the last ones arrive; the tests beside it hash
// cheaply (passwordtest), so it runs in parallel with them.
func TestSignInGetsThroughAFlood(t *testing.T) {
	t.Parallel()
	// The clock stands still, so that no attempt of the flood stops
	// counting however slowly the machine hashes.
	clock := clocktest.New(time.Now())
	f := newFixture(t, withPasswords(password.PoolConfig{Concurrency: 1, Queue: 4, Wait: time.Minute}),
		func(c *dashboard.Config) { c.Now = clock.Now })
	const attempts, addresses = 200, 40
	clients := make([]*http.Client, addresses)
	forms := make([]url.Values, addresses)
	// The flood brings its own CSRF token (field and cookie agree) and
	// keeps no cookies: a busy page sets a fresh token, which would turn
	// the address's later attempts into 403s before they reach the pool.
	flood := map[string]string{"Cookie": "posthaste_login_csrf=flood"}
	for i := range clients {
		clients[i] = clientFrom(t, fmt.Sprintf("127.0.0.%d", 2+i))
		clients[i].Jar = nil
		forms[i] = url.Values{"csrf": {"flood"}, "email": {fmt.Sprintf("guess-%d@example.com", i)}, "password": {"wrong"}}
	}
	owner := clientFrom(t, "127.0.1.1")
	ownerForm := f.signInForm(owner, f.a.Email, f.a.Password)

	answers := make(chan attempt, attempts)
	for i := range attempts {
		go func() {
			answers <- postRaw(clients[i%addresses], f.srv.URL+"/dashboard/login", forms[i%addresses], flood)
		}()
	}
	// The owner comes once every attempt of the flood has reached the
	// server, while the first ones still wait for the pool: a flood that
	// is still arriving could only be of first attempts (rank 0).
	ranks := func() []int {
		var r []int
		for i := range addresses {
			r = append(r, f.dash.SignInRank(fmt.Sprintf("127.0.0.%d", 2+i)))
		}
		return r
	}
	deadline := time.Now().Add(time.Minute)
	for slices.ContainsFunc(ranks(), func(n int) bool { return n < attempts/addresses }) {
		if time.Now().After(deadline) {
			t.Fatalf("the flood did not reach the server: ranks %v, %d answered", ranks(), len(answers))
		}
		time.Sleep(5 * time.Millisecond)
	}
	ownerAnswer := make(chan attempt, 1)
	go func() { ownerAnswer <- postRaw(owner, f.srv.URL+"/dashboard/login", ownerForm, nil) }()
	counts := map[int]int{}
	for range attempts {
		a := <-answers
		require.NoError(t, a.err)
		counts[a.status]++
		if a.status == http.StatusServiceUnavailable {
			require.NotEmpty(t, a.retryAfter)
			require.Contains(t, a.body, "The server is busy")
		}
	}
	a := <-ownerAnswer
	require.NoError(t, a.err)
	require.Equal(t, http.StatusSeeOther, a.status, "the owner signs in during the flood: %v", counts)
	t.Logf("flood statuses: %v", counts)
	require.Positive(t, counts[http.StatusServiceUnavailable], "the pool refused some")
}
