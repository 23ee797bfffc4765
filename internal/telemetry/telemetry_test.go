package telemetry

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMethodLabel(t *testing.T) {
	for in, want := range map[string]string{
		"GET": "GET", "HEAD": "HEAD", "POST": "POST", "PUT": "PUT", "PATCH": "PATCH", "DELETE": "DELETE",
		"OPTIONS": "OPTIONS", "CONNECT": "CONNECT", "TRACE": "TRACE",
		"get": "OTHER", "PROPFIND": "OTHER", "X-RANDOM-1234": "OTHER", "": "OTHER",
	} {
		require.Equal(t, want, MethodLabel(in), in)
	}
}
