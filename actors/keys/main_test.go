package keys_test

import (
	"testing"

	"gatehouse/actors/actorstest"
)

// TestMain checks every test of the package (internal ones too) for
// leaked goroutines.
func TestMain(m *testing.M) { actorstest.VerifyTestMain(m) }
