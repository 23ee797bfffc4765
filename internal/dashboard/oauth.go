package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/posthaste/posthaste/internal/store"
)

// OAuth configures sign-in through Google (OpenID Connect) and GitHub.
// A provider without a client id is not offered.
// Callbacks are Config.PublicURL/dashboard/oauth/<provider>/callback.
//
// Only a provider's verified email signs in, and only into an account whose
// address is proven (store.User.EmailVerifiedAt): one created from an
// invitation link that was shown to a team owner rather than emailed could
// have been set up by someone who does not own the address, and signing its
// real owner into it would hand them an account another person holds the
// password to (account pre-hijacking). Such a sign-in is refused; the
// account's user proves the address by signing in with the password and
// confirming with the provider from the Team page, or by an emailed reset
// link.
type OAuth struct {
	// Signup lets a first sign-in with an unknown email create the user
	// and a team of their own.
	Signup bool
	Google Provider
	GitHub Provider
}

// Provider is one OAuth client registration.
type Provider struct {
	ClientID     string
	ClientSecret string
	// Issuer (Google) is the OpenID issuer; "" → https://accounts.google.com.
	Issuer string
	// URL (GitHub) is the web base for authorize and token; "" → https://github.com.
	URL string
	// APIURL (GitHub) is the REST API base; "" → https://api.github.com.
	APIURL string
}

const oauthCookie = "posthaste_oauth"

// oidcProviders caches discovered OpenID providers by issuer, so that a
// provider that is down at start-up does not keep the server from starting.
type oidcProviders struct {
	mu sync.Mutex
	m  map[string]*oidc.Provider
}

func (p *oidcProviders) get(ctx context.Context, issuer string) (*oidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr, ok := p.m[issuer]; ok {
		return pr, nil
	}
	pr, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering %s: %w", issuer, err)
	}
	if p.m == nil {
		p.m = map[string]*oidc.Provider{}
	}
	p.m[issuer] = pr
	return pr, nil
}

func (h *signInHandler) googleIssuer() string {
	if h.cfg.OAuth.Google.Issuer != "" {
		return strings.TrimRight(h.cfg.OAuth.Google.Issuer, "/")
	}
	return "https://accounts.google.com"
}

// oauthConfig returns the oauth2 configuration of a provider, or nil when
// it is not configured.
func (h *signInHandler) oauthConfig(ctx context.Context, provider string) (*oauth2.Config, error) {
	o := h.cfg.OAuth
	redirect := h.link("/dashboard/oauth/" + provider + "/callback")
	switch provider {
	case "google":
		if o.Google.ClientID == "" {
			return nil, nil
		}
		pr, err := h.oidc.get(ctx, h.googleIssuer())
		if err != nil {
			return nil, err
		}
		return &oauth2.Config{ClientID: o.Google.ClientID, ClientSecret: o.Google.ClientSecret,
			Endpoint: pr.Endpoint(), RedirectURL: redirect, Scopes: []string{oidc.ScopeOpenID, "email"}}, nil
	case "github":
		if o.GitHub.ClientID == "" {
			return nil, nil
		}
		base := strings.TrimRight(o.GitHub.URL, "/")
		if base == "" {
			base = "https://github.com"
		}
		return &oauth2.Config{ClientID: o.GitHub.ClientID, ClientSecret: o.GitHub.ClientSecret,
			Endpoint:    oauth2.Endpoint{AuthURL: base + "/login/oauth/authorize", TokenURL: base + "/login/oauth/access_token"},
			RedirectURL: redirect, Scopes: []string{"read:user", "user:email"}}, nil
	}
	return nil, nil
}

// oauthState travels in a short-lived HttpOnly cookie between the start
// and the callback.
type oauthState struct {
	Provider string `json:"p"`
	State    string `json:"s"`
	Verifier string `json:"v"`
	Nonce    string `json:"n"`
	Next     string `json:"x"`
	// Confirm: the signed-in user proves their address with the provider
	// instead of signing in.
	Confirm bool `json:"c,omitempty"`
}

func (h *signInHandler) oauthStart(w http.ResponseWriter, r *http.Request) {
	if !h.anonymousAttempt(w, r) {
		return
	}
	provider := r.PathValue("provider")
	conf, err := h.oauthConfig(r.Context(), provider)
	if err != nil {
		h.logger.Warn("oauth provider unavailable", "provider", provider, "err", err)
		h.renderLogin(w, http.StatusBadGateway, loginData{Error: "That sign-in provider is unavailable. Try again later."})
		return
	}
	if conf == nil {
		http.NotFound(w, r)
		return
	}
	st := oauthState{Provider: provider, State: randomToken(), Verifier: oauth2.GenerateVerifier(),
		Nonce: randomToken(), Next: safeNext(r.URL.Query().Get("next")), Confirm: r.URL.Query().Get("confirm") == "1"}
	if st.Confirm {
		st.Next = "/dashboard/team"
	}
	b, _ := json.Marshal(st)
	http.SetCookie(w, h.cookie(oauthCookie, base64URL(b), 10*time.Minute))
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(st.Verifier)}
	if provider == "google" {
		opts = append(opts, oidc.Nonce(st.Nonce))
	}
	http.Redirect(w, r, conf.AuthCodeURL(st.State, opts...), http.StatusFound)
}

func (h *signInHandler) oauthCallback(w http.ResponseWriter, r *http.Request) {
	if !h.anonymousAttempt(w, r) {
		return
	}
	provider := r.PathValue("provider")
	fail := func(msg string) {
		h.renderLogin(w, http.StatusUnauthorized, loginData{Error: msg})
	}
	c, err := r.Cookie(oauthCookie)
	var st oauthState
	if err == nil {
		err = decodeCookieJSON(c.Value, &st)
	}
	http.SetCookie(w, h.cookie(oauthCookie, "", -time.Second))
	if err != nil || st.Provider != provider || !sameToken(r.URL.Query().Get("state"), st.State) {
		fail("The sign-in expired or was started elsewhere. Try again.")
		return
	}
	if e := r.URL.Query().Get("error"); e != "" {
		fail("Sign-in was canceled.")
		return
	}
	conf, err := h.oauthConfig(r.Context(), provider)
	if err != nil || conf == nil {
		fail("That sign-in provider is unavailable. Try again later.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	tok, err := conf.Exchange(ctx, r.URL.Query().Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		h.logger.Warn("oauth code exchange failed", "provider", provider, "err", err)
		fail("Sign-in failed. Try again.")
		return
	}
	var email string
	switch provider {
	case "google":
		email, err = h.googleEmail(ctx, tok, st.Nonce)
	case "github":
		email, err = h.githubEmail(ctx, conf, tok)
	}
	if err != nil {
		h.logger.Warn("oauth identity rejected", "provider", provider, "err", err)
		fail("Sign-in failed: the account has no verified email address.")
		return
	}
	if st.Confirm {
		h.confirmWithProvider(w, r, provider, email)
		return
	}
	u, err := h.accounts.Members.UserByEmail(r.Context(), email)
	if errors.Is(err, store.ErrNotFound) {
		if !h.cfg.OAuth.Signup {
			fail("There is no Posthaste account for " + email + ". Ask a team owner for an invitation.")
			return
		}
		u, err = h.signup(r.Context(), email)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if u.EmailVerifiedAt == nil {
		// The account was set up through a link that did not prove the
		// address: whoever chose its password may not own the address.
		h.logger.Warn("oauth sign-in refused: the account's address is not proven", "provider", provider)
		msg := "The Posthaste account for " + email + " was set up through an invitation link that was not emailed to that address, " +
			"so its address is not confirmed and " + providerName(provider) + " cannot sign into it. " +
			"If the account is yours, sign in with its password and confirm the address on the Team page."
		if h.cfg.Mailer != nil {
			msg += " If it is not, choose \"Forgot password?\": the link we email to the address lets you take the account over."
		}
		h.renderLogin(w, http.StatusForbidden, loginData{Error: msg, Next: st.Next})
		return
	}
	h.startSession(w, r, u, st.Next)
}

// confirmWithProvider proves the address of the signed-in user with the
// verified email a provider gave: it must be the user's own address.
func (h *signInHandler) confirmWithProvider(w http.ResponseWriter, r *http.Request, provider, email string) {
	se, err := h.cookieSession(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if se == nil || se.MFAPending {
		h.renderLogin(w, http.StatusUnauthorized, loginData{Error: "Sign in first, then confirm your address on the Team page.",
			Next: "/dashboard/team"})
		return
	}
	if email != se.UserEmail {
		h.teamHandler.renderTeam(w, r, se, http.StatusConflict, teamData{Error: providerName(provider) + " vouched for " + email +
			", not for " + se.UserEmail + ", so your address is still not confirmed. Sign in to " + providerName(provider) +
			" with the account that has your address and try again."})
		return
	}
	if err := h.accounts.Members.VerifyEmail(r.Context(), se.UserID); err != nil {
		h.fail(w, r, err)
		return
	}
	h.logger.Info("address proven by an identity provider", "provider", provider)
	h.teamHandler.renderTeam(w, r, se, http.StatusOK, teamData{Message: "Your address is confirmed: you can now also sign in with " +
		providerName(provider) + "."})
}

func providerName(provider string) string {
	switch provider {
	case "google":
		return "Google"
	case "github":
		return "GitHub"
	}
	return provider
}

// googleEmail verifies the ID token (signature, issuer, audience, expiry,
// nonce) and returns its verified email.
func (h *signInHandler) googleEmail(ctx context.Context, tok *oauth2.Token, nonce string) (string, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", errors.New("no id_token in the token response")
	}
	pr, err := h.oidc.get(ctx, h.googleIssuer())
	if err != nil {
		return "", err
	}
	idt, err := pr.Verifier(&oidc.Config{ClientID: h.cfg.OAuth.Google.ClientID}).Verify(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("verifying id token: %w", err)
	}
	if !sameToken(idt.Nonce, nonce) {
		return "", errors.New("id token nonce mismatch")
	}
	var claims struct {
		Email    string `json:"email"`
		Verified bool   `json:"email_verified"`
	}
	if err := idt.Claims(&claims); err != nil {
		return "", fmt.Errorf("reading id token claims: %w", err)
	}
	if claims.Email == "" || !claims.Verified {
		return "", errors.New("email missing or not verified")
	}
	return strings.ToLower(claims.Email), nil
}

// githubEmail returns the primary verified email of the GitHub account
// (GET /user/emails).
func (h *signInHandler) githubEmail(ctx context.Context, conf *oauth2.Config, tok *oauth2.Token) (string, error) {
	api := strings.TrimRight(h.cfg.OAuth.GitHub.APIURL, "/")
	if api == "" {
		api = "https://api.github.com"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/user/emails", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	res, err := conf.Client(ctx, tok).Do(req)
	if err != nil {
		return "", fmt.Errorf("reading GitHub emails: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("reading GitHub emails: status %d", res.StatusCode)
	}
	var emails []struct {
		Email    string `json:"email"`
		Primary  bool   `json:"primary"`
		Verified bool   `json:"verified"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&emails); err != nil {
		return "", fmt.Errorf("reading GitHub emails: %w", err)
	}
	for _, e := range emails {
		if e.Primary && e.Verified && e.Email != "" {
			return strings.ToLower(e.Email), nil
		}
	}
	return "", errors.New("no primary verified email")
}

// signup creates a user without a password, whose address the provider
// verified, and a team of their own.
func (h *signInHandler) signup(ctx context.Context, email string) (store.User, error) {
	u, teamID, err := h.accounts.Members.SignUp(ctx, email, h.now())
	if err != nil {
		return store.User{}, err
	}
	h.logger.Info("user signed up", "team_id", teamID)
	return u, nil
}

func decodeCookieJSON(v string, dst any) error {
	b, err := base64URLDecode(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}

// providersShown lists the configured providers for the login page.
func (h *signInHandler) providersShown(next string) []providerLink {
	return h.providerLinks("?next=" + url.QueryEscape(next))
}

// providersConfirming lists the configured providers for confirming the
// signed-in user's address (Team page).
func (h *signInHandler) providersConfirming() []providerLink {
	return h.providerLinks("?confirm=1")
}

func (h *signInHandler) providerLinks(query string) []providerLink {
	var out []providerLink
	if h.cfg.OAuth.Google.ClientID != "" {
		out = append(out, providerLink{Name: "Google", URL: "/dashboard/oauth/google/start" + query})
	}
	if h.cfg.OAuth.GitHub.ClientID != "" {
		out = append(out, providerLink{Name: "GitHub", URL: "/dashboard/oauth/github/start" + query})
	}
	return out
}

type providerLink struct {
	Name string
	URL  string
}
