package dashboard_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func hashOf(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// pending signs a new browser in with the password of f.a, who has a
// second factor, and returns it with the CSRF token of the code's form.
func (f *fixture) pending() (*http.Client, string) {
	f.t.Helper()
	c := f.browser()
	res, _ := f.login(c, f.a.Email, f.a.Password)
	require.Equal(f.t, http.StatusSeeOther, res.StatusCode)
	require.Contains(f.t, res.Header.Get("Location"), "/dashboard/login/mfa")
	_, page := get(f.t, c, f.srv.URL+"/dashboard/login/mfa")
	return c, csrf(f.t, page)
}

// RFC 6238 §5.2: the verifier must not accept the second attempt of an OTP
// after the first was validated; codes were accepted throughout their
// window of a minute and a half.
func TestTOTPCodeIsAcceptedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	secret, _ := f.enroll(c)

	// The code that confirmed the setup does not sign in.
	used, err := totp.GenerateCode(secret, time.Now())
	require.NoError(t, err)
	c1, tok := f.pending()
	res, page := post(t, c1, f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {tok}, "code": {used}})
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Contains(t, page, "That code was already used")

	next, err := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	require.NoError(t, err)
	res, _ = post(t, c1, f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {tok}, "code": {next}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)

	// Another session cannot use it again.
	c2, tok2 := f.pending()
	res, _ = post(t, c2, f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {tok2}, "code": {next}})
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	// Turning the second factor off takes a fresh code too.
	_, page = get(t, c1, f.srv.URL+"/dashboard/account")
	res, page = post(t, c1, f.srv.URL+"/dashboard/account/mfa/disable", url.Values{"csrf": {csrf(t, page)}, "code": {next}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, page)
}

// Parallel uses of one fresh code: exactly one passes.
func TestTOTPParallelUseOfOneCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	secret, _ := f.enroll(c)
	next, err := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	require.NoError(t, err)
	const n = 4
	clients := make([]*http.Client, n)
	toks := make([]string, n)
	for i := range n {
		clients[i], toks[i] = f.pending()
	}
	answers := make(chan attempt, n)
	for i := range n {
		go func() {
			answers <- postRaw(clients[i], f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {toks[i]}, "code": {next}}, nil)
		}()
	}
	counts := map[int]int{}
	for range n {
		a := <-answers
		require.NoError(t, a.err)
		counts[a.status]++
	}
	require.Equal(t, map[int]int{http.StatusSeeOther: 1, http.StatusUnauthorized: n - 1}, counts)
}

// A recovery code works once, even when used from several sessions at once.
func TestRecoveryCodeIsSpentOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, codes := f.enroll(c)
	const n = 4
	clients := make([]*http.Client, n)
	toks := make([]string, n)
	for i := range n {
		clients[i], toks[i] = f.pending()
	}
	answers := make(chan attempt, n)
	for i := range n {
		go func() {
			answers <- postRaw(clients[i], f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {toks[i]}, "code": {codes[0]}}, nil)
		}()
	}
	counts := map[int]int{}
	for range n {
		a := <-answers
		require.NoError(t, a.err)
		counts[a.status]++
	}
	require.Equal(t, map[int]int{http.StatusSeeOther: 1, http.StatusUnauthorized: n - 1}, counts)
	c2, tok := f.pending()
	res, _ := post(t, c2, f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {tok}, "code": {codes[1]}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the others still work")
}

// The session between the password and the code used to live 14 days,
// like a full one.
func TestPendingSessionLivesMinutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	secret, _ := f.enroll(c)

	pc := f.browser()
	_, page := get(t, pc, f.srv.URL+"/dashboard/login")
	res, _ := post(t, pc, f.srv.URL+"/dashboard/login", url.Values{"csrf": {csrf(t, page)}, "email": {f.a.Email}, "password": {f.a.Password}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	pending := sessionCookie(res)
	require.NotNil(t, pending)
	require.LessOrEqual(t, pending.MaxAge, 600, "the cookie lives ten minutes")
	se, err := storetest.SessionByHash(context.Background(), f.store, hashOf(pending.Value))
	require.NoError(t, err)
	require.True(t, se.MFAPending)
	require.WithinDuration(t, time.Now().Add(10*time.Minute), se.ExpiresAt, time.Minute, "so does the session")

	_, page = get(t, pc, f.srv.URL+"/dashboard/login/mfa")
	code, err := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	require.NoError(t, err)
	res, _ = post(t, pc, f.srv.URL+"/dashboard/login/mfa", url.Values{"csrf": {csrf(t, page)}, "code": {code}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	full := sessionCookie(res)
	require.NotNil(t, full, "passing the code gives a new session cookie")
	require.NotEqual(t, pending.Value, full.Value)
	require.Equal(t, int((14 * 24 * time.Hour).Seconds()), full.MaxAge)
	se, err = storetest.SessionByHash(context.Background(), f.store, hashOf(full.Value))
	require.NoError(t, err)
	require.False(t, se.MFAPending)
	require.WithinDuration(t, time.Now().Add(14*24*time.Hour), se.ExpiresAt, time.Minute)
	_, err = storetest.SessionByHash(context.Background(), f.store, hashOf(pending.Value))
	require.Error(t, err, "the half-signed-in id is gone")
	res, _ = get(t, pc, f.srv.URL+"/dashboard/emails")
	require.Equal(t, http.StatusOK, res.StatusCode)
}

// Parallel guesses of the code were all checked: the throttle counted a
// failure only after it was made.
func TestSecondFactorGuessesCountBeforeTheCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	f.enroll(c)
	pc, tok := f.pending()
	counts := f.parallel(20, pc, "/dashboard/login/mfa", url.Values{"csrf": {tok}, "code": {"000000"}}, nil)
	require.Equal(t, map[int]int{http.StatusUnauthorized: 5, http.StatusTooManyRequests: 15}, counts)
}
