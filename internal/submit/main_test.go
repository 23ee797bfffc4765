package submit

import (
	"os"
	"testing"

	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
