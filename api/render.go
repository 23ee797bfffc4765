package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// timeFormat is RFC 3339 with microseconds in UTC.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

type listBody[T any] struct {
	Object  string `json:"object"`
	HasMore bool   `json:"has_more"`
	Data    []T    `json:"data"`
}

func list[T any](data []T, more bool) listBody[T] {
	if data == nil {
		data = []T{}
	}
	return listBody[T]{Object: "list", HasMore: more, Data: data}
}

// listFunc lists one page of a team's rows.
type listFunc[T any] func(ctx context.Context, teamID uuid.UUID, p store.Page) ([]T, bool, error)

// Without `limit`, a list answers one of two ways, as Resend documents
// (resend.com/docs/api-reference/pagination): the lists that existed before
// Resend added pagination (domains, API keys, contacts, segments, topics,
// broadcasts, received emails) answer every row, up to listAllCap, with
// has_more only beyond it; the others (emails, logs and the newer lists)
// answer a page of pageDefault rows. With `limit`, every list pages alike.
const (
	pageDefault = 20
	listAllCap  = 1000
)

// listing says how a list endpoint answers without `limit`.
type listing bool

const (
	paged   listing = false // pageDefault rows
	listAll listing = true  // every row up to listAllCap
)

// respondList answers a list endpoint: it reads the page parameters, lists
// that page of the caller's team with fetch and renders each row.
func respondList[T, J any](s *Server, c *gin.Context, how listing, fetch listFunc[T], render func(T) J) {
	p, err := page(c, how)
	if err != nil {
		s.respondError(c, err)
		return
	}
	rows, more, err := fetch(c.Request.Context(), principal(c).TeamID, p)
	if err != nil {
		s.respondError(c, err)
		return
	}
	out := make([]J, len(rows))
	for i, r := range rows {
		out[i] = render(r)
	}
	c.PureJSON(http.StatusOK, list(out, more))
}

// getFunc loads (or deletes and returns) one row of a team by id.
type getFunc[T any] func(ctx context.Context, team, id uuid.UUID) (T, error)

// respondOne answers GET /<things>/:id, or a DELETE whose get deletes: the
// team's row rendered, a 404 with missing when the team has no such row.
func respondOne[T, J any](s *Server, c *gin.Context, get getFunc[T], missing string, render func(T) J) {
	id, err := pathID(c)
	if err != nil {
		s.respondError(c, err)
		return
	}
	row, err := get(c.Request.Context(), principal(c).TeamID, id)
	if err != nil {
		s.respondError(c, notFound(err, missing))
		return
	}
	c.PureJSON(http.StatusOK, render(row))
}

// pathID parses the :id parameter: a malformed id is a 422, so only
// well-formed ids reach the store (where unknown ones are a 404).
func pathID(c *gin.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return uuid.Nil, errorf(http.StatusUnprocessableEntity, nameInvalidParameter,
			"The id must be a valid UUID.")
	}
	return id, nil
}

// page reads limit, after and before; without limit, the page is how's.
func page(c *gin.Context, how listing) (store.Page, error) {
	p := store.Page{Limit: pageDefault}
	if how == listAll {
		p.Limit = listAllCap
	}
	if v, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return p, errorf(http.StatusUnprocessableEntity, nameValidation,
				"The `limit` parameter must be an integer between 1 and 100.")
		}
		p.Limit = n
	}
	after, hasAfter := c.GetQuery("after")
	before, hasBefore := c.GetQuery("before")
	if hasAfter && hasBefore {
		return p, errorf(http.StatusUnprocessableEntity, nameValidation,
			"The `after` and `before` parameters cannot be used together.")
	}
	for _, q := range []struct {
		name, val string
		set       bool
		dst       **uuid.UUID
	}{{"after", after, hasAfter, &p.After}, {"before", before, hasBefore, &p.Before}} {
		if !q.set {
			continue
		}
		id, err := uuid.Parse(q.val)
		if err != nil {
			return p, errorf(http.StatusUnprocessableEntity, nameValidation,
				"The `"+q.name+"` parameter must be a valid id.")
		}
		*q.dst = &id
	}
	return p, nil
}
