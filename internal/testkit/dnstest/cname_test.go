package dnstest

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCNAME(t *testing.T) {
	ctx := context.Background()
	s := NewServer(t)
	s.AddCNAME("links.example.test", "track.posthaste.example")
	s.AddCNAME("img.example.test", "cdn.example.test")
	s.AddA("cdn.example.test", "192.0.2.7")
	s.AddA("plain.example.test", "192.0.2.8")
	r := s.Resolver()

	cname, err := r.LookupCNAME(ctx, "links.example.test.")
	require.NoError(t, err)
	require.Equal(t, "track.posthaste.example.", cname)
	cname, err = r.LookupCNAME(ctx, "LINKS.example.test")
	require.NoError(t, err)
	require.Equal(t, "track.posthaste.example.", cname)

	cname, err = r.LookupCNAME(ctx, "img.example.test.")
	require.NoError(t, err)
	require.Equal(t, "cdn.example.test.", cname)
	addrs, err := r.LookupHost(ctx, "img.example.test.")
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.7"}, addrs, "the alias's target answers the address query")

	cname, err = r.LookupCNAME(ctx, "plain.example.test.")
	require.NoError(t, err)
	require.Equal(t, "plain.example.test.", cname, "a name without CNAME is its own canonical name")

	_, err = r.LookupCNAME(ctx, "nothing.example.test.")
	var de *net.DNSError
	require.True(t, errors.As(err, &de), "%v", err)
	require.True(t, de.IsNotFound)
}
