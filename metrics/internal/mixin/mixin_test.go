package mixin_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/metrics/internal/mixin"
)

const root = "../../.."

// The rules, their tests, the dashboard and the runbook are exactly what
// the source gives: none is edited by hand or left behind by a change of
// the source.
func TestGeneratedFilesAreUpToDate(t *testing.T) {
	s, err := mixin.Load(filepath.Join(root, mixin.SourcePath))
	require.NoError(t, err)
	files, err := s.Files()
	require.NoError(t, err)
	require.Len(t, files, 4)
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join(root, path))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "%s is stale: run go generate ./metrics", path)
	}
}

// Every alert has a unit test where it fires and one where it stays quiet.
func TestEveryAlertFiresAndStaysQuietInItsTests(t *testing.T) {
	s, err := mixin.Load(filepath.Join(root, mixin.SourcePath))
	require.NoError(t, err)
	require.NotEmpty(t, s.Alerts)
	for _, a := range s.Alerts {
		fires, quiet := false, false
		for _, tc := range a.Tests {
			for _, c := range tc.Cases {
				if len(c.ExpAlerts) > 0 {
					fires = true
				} else {
					quiet = true
				}
			}
		}
		assert.True(t, fires, "no test where %s fires", a.Name)
		assert.True(t, quiet, "no test where %s stays quiet", a.Name)
	}
}
