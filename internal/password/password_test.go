package password

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHashVerify(t *testing.T) {
	h, err := Hash("correct horse")
	require.NoError(t, err)
	require.Regexp(t, `^\$argon2id\$v=19\$m=65536,t=3,p=2\$`, h)
	ok, err := Verify("correct horse", h)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = Verify("wrong horse", h)
	require.NoError(t, err)
	require.False(t, ok)
	h2, err := Hash("correct horse")
	require.NoError(t, err)
	require.NotEqual(t, h, h2, "salted")
	for _, bad := range []string{"", "$argon2i$v=19$m=1,t=1,p=1$AA$AA", "$argon2id$v=19$m=x$AA$AA", "$argon2id$v=19$m=1,t=1,p=1$!!$AA"} {
		_, err := Verify("x", bad)
		require.ErrorIs(t, err, ErrMalformed, bad)
	}
}
