package telemetry

import (
	"testing"
	"time"

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

func TestMilliseconds(t *testing.T) {
	for d, want := range map[time.Duration]float64{
		0: 0, time.Microsecond: 0.001, 1500 * time.Microsecond: 1.5, 2*time.Second + 999: 2000, -time.Millisecond: -1,
	} {
		if got := Milliseconds(d); got != want {
			t.Errorf("Milliseconds(%v) = %v, want %v", d, got, want)
		}
	}
}
