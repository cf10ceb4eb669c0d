package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// probeTimeout bounds the connection check of one endpoint.
const probeTimeout = 5 * time.Second

// ErrConnectionRefused: an endpoint the user named refused the connection.
var ErrConnectionRefused = errors.New("connection refused")

// probeEndpoints connects once to each endpoint the user named
// (BIGTABLE_EMULATOR_HOST, -data-endpoint, -admin-endpoint) and reports
// one that refuses the connection at once. The Bigtable client retries an
// unavailable endpoint with backoff until its deadline, so without this a
// typo in a port or an emulator not started read as silence for 30-60 s,
// then as a stall. Only a refusal is reported: any other outcome (a
// timeout, a name that does not resolve, an endpoint reached through a
// proxy, which is not probed) is left to the command's calls, which name
// the endpoint when they fail.
func probeEndpoints(ctx context.Context, g *globals, getenv func(string) string) error {
	if getenv("HTTPS_PROXY") != "" || getenv("https_proxy") != "" {
		return nil
	}
	type endpoint struct{ addr, from string }
	var eps []endpoint
	if a := getenv("BIGTABLE_EMULATOR_HOST"); a != "" {
		if _, rest, ok := strings.Cut(a, "://"); ok {
			a = rest
		}
		eps = append(eps, endpoint{a, "BIGTABLE_EMULATOR_HOST"})
	} else {
		if g.dataEndpoint != "" {
			eps = append(eps, endpoint{g.dataEndpoint, g.source("data-endpoint")})
		}
		if g.adminEndpoint != "" && g.adminEndpoint != g.dataEndpoint {
			eps = append(eps, endpoint{g.adminEndpoint, g.source("admin-endpoint")})
		}
	}
	for _, ep := range eps {
		d := net.Dialer{Timeout: probeTimeout}
		c, err := d.DialContext(ctx, "tcp", ep.addr)
		if err == nil {
			_ = c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("cannot connect to %s (%s): %w (is the server running, and is the port right?)", ep.addr, ep.from, ErrConnectionRefused)
		}
	}
	return nil
}
