package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A failure to set the table up is reported, not dropped (staticcheck
// SA4006: a shadowed err once lost it and the race ran on a missing table).
// A cancelled context makes CreateTable fail.
func TestStartServerReportsTableSetupFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tbl, closeAll, err := startServer(ctx)
	if closeAll != nil {
		closeAll()
	}
	require.ErrorContains(t, err, "create table")
	require.Nil(t, tbl)
}
