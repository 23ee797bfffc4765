package submit

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeBatch(t *testing.T) {
	for _, body := range []string{`{"from":"a@x.com"}`, `"[]"`, `5`, `[1,`, `[] []`} {
		_, err := DecodeBatch([]byte(body))
		var e *Error
		require.True(t, errors.As(err, &e), body)
		require.Equal(t, KindValidation, e.Kind, body)
	}
	for _, body := range []string{`null`, `[]`, " \n[ ] "} {
		items, err := DecodeBatch([]byte(body))
		require.NoError(t, err, body)
		require.Empty(t, items, body)
	}

	items, err := DecodeBatch([]byte(` [ {"from":"a@x.com","to":["b@x.com"],"subject":"[1, {\"x\"}]"} ,
		5, null, {"to": 5}, {"subject":"]},{"} ] `))
	require.NoError(t, err)
	require.Len(t, items, 5)
	require.NoError(t, items[0].Err)
	require.Equal(t, SendRequest{From: "a@x.com", To: AddressList{"b@x.com"}, Subject: ptr(`[1, {"x"}]`)}, items[0].Request)
	for _, i := range []int{1, 2, 3} {
		var e *Error
		require.True(t, errors.As(items[i].Err, &e), i)
		require.Equal(t, KindValidation, e.Kind)
		require.Equal(t, SendRequest{}, items[i].Request, "a request that did not decode is empty")
	}
	require.Equal(t, "to", items[3].Err.(*Error).Field)
	require.NoError(t, items[4].Err)
	require.Equal(t, ptr("]},{"), items[4].Request.Subject)
}
