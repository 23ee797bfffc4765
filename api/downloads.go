package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
)

// Signed download URLs, shared by received emails (receiving.go) and the
// archives of data requests (datarequests.go): a URL signed for one team's
// one object with HMAC-SHA256 under a key derived from the master key,
// valid until it expires, so it works without the API key.

// downloadTTL is how long a download URL works.
const downloadTTL = time.Hour

// DownloadKeyPurpose derives the key of download URLs from the master key.
const DownloadKeyPurpose = "posthaste received downloads v1"

// downloadKey is the key of download URLs; nil without a master key.
func (s *Server) downloadKey() []byte {
	if s.box == nil {
		return nil
	}
	return s.box.DeriveKey(DownloadKeyPurpose)
}

// downloadSignature signs one object of one team until expires.
func downloadSignature(key []byte, kind string, team, email, att uuid.UUID, expires int64) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s\x00%s\x00%s\x00%s\x00%d", kind, team, email, att, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// signedDownloadURL is u with the signed query (team, expiry, signature)
// of a download of kind that checkDownload accepts until exp; ok is false
// without a master key.
func (s *Server) signedDownloadURL(u, kind string, team, object, att uuid.UUID, exp time.Time) (string, bool) {
	key := s.downloadKey()
	if key == nil {
		return "", false
	}
	q := url.Values{"team": {team.String()}, "expires": {strconv.FormatInt(exp.Unix(), 10)},
		"signature": {downloadSignature(key, kind, team, object, att, exp.Unix())}}
	return u + "?" + q.Encode(), true
}

// checkDownload verifies the signed query of a download URL; it has
// answered the request when ok is false. An expired, altered or foreign
// URL is a 404 like an unknown object, so it says nothing of what exists.
func (s *Server) checkDownload(c *gin.Context, kind string, email, att uuid.UUID) (uuid.UUID, bool) {
	gone := func() (uuid.UUID, bool) {
		s.respondError(c, errorf(http.StatusNotFound, nameNotFound,
			"The download link is invalid or has expired; fetch a new one from the API."))
		return uuid.Nil, false
	}
	key := s.downloadKey()
	team, err := uuid.Parse(c.Query("team"))
	if key == nil || err != nil {
		return gone()
	}
	exp, err := strconv.ParseInt(c.Query("expires"), 10, 64)
	if err != nil || time.Now().Unix() > exp {
		return gone()
	}
	want := downloadSignature(key, kind, team, email, att, exp)
	if !hmac.Equal([]byte(want), []byte(c.Query("signature"))) {
		return gone()
	}
	return team, true
}

// baseURL is the public URL, else the scheme and host the request came to.
func (s *Server) baseURL(c *gin.Context) string {
	if s.publicURL != "" {
		return s.publicURL
	}
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host
}
