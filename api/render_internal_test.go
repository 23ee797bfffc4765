package api

import (
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestPage: without `limit` a paged list answers pageDefault rows and a
// list Resend documents as returning every item answers up to listAllCap;
// `limit`, `after` and `before` read the same for both.
func TestPage(t *testing.T) {
	id := uuid.MustParse("0190a4f0-0000-7000-8000-000000000001")
	for _, tc := range []struct {
		name, query string
		how         listing
		limit       int
		after       bool
		before      bool
		err         string
	}{
		{"paged default", "", paged, 20, false, false, ""},
		{"all default", "", listAll, 1000, false, false, ""},
		{"paged limit", "limit=7", paged, 7, false, false, ""},
		{"all limit", "limit=7", listAll, 7, false, false, ""},
		{"all limit max", "limit=100", listAll, 100, false, false, ""},
		{"all after", "after=" + id.String(), listAll, 1000, true, false, ""},
		{"paged before", "before=" + id.String(), paged, 20, false, true, ""},
		{"limit over 100", "limit=101", listAll, 0, false, false, "between 1 and 100"},
		{"limit zero", "limit=0", paged, 0, false, false, "between 1 and 100"},
		{"limit text", "limit=all", listAll, 0, false, false, "between 1 and 100"},
		{"after and before", "after=" + id.String() + "&before=" + id.String(), listAll, 0, false, false, "cannot be used together"},
		{"bad cursor", "after=nope", paged, 0, false, false, "must be a valid id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := gin.CreateTestContext(httptest.NewRecorder())
			c.Request = httptest.NewRequest("GET", "/x?"+tc.query, nil)
			p, err := page(c, tc.how)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.limit, p.Limit)
			require.Equal(t, tc.after, p.After != nil)
			require.Equal(t, tc.before, p.Before != nil)
			if tc.after {
				require.Equal(t, id, *p.After)
			}
			if tc.before {
				require.Equal(t, id, *p.Before)
			}
		})
	}
}
