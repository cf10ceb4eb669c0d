package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// cbtrcPath is the file cbt reads its defaults from, and so does bttl:
// $HOME/.cbtrc.
func cbtrcPath() string { return filepath.Join(os.Getenv("HOME"), ".cbtrc") }

// cbtrcKeys are the keys cbt's .cbtrc takes, each the name of the flag it
// gives a default to. auth-token is cbt's too, but bttl has no use for it:
// it is refused rather than ignored, so a connection never silently goes
// out without the token the file asked for.
var cbtrcKeys = map[string]bool{
	"project": true, "instance": true, "creds": true, "timeout": true,
	"admin-endpoint": true, "data-endpoint": true, "cert-file": true, "user-agent": true,
}

// readCBTRC parses a .cbtrc: "key = value" lines, blank lines ignored, as
// cbt reads it. A missing file is no error (an empty config); a line
// without "=" or with a key cbt does not know is, naming the file and line.
func readCBTRC(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want key = value, got %q", path, n, line)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch {
		case key == "auth-token":
			return nil, fmt.Errorf("%s:%d: auth-token is not supported by bttl (use creds, or Application Default Credentials)", path, n)
		case !cbtrcKeys[key]:
			return nil, fmt.Errorf("%s:%d: unknown key %q (want one of project, instance, creds, timeout, admin-endpoint, data-endpoint, cert-file, user-agent)", path, n, key)
		}
		out[key] = val
	}
	return out, sc.Err()
}

// applyCBTRC gives every global flag that the command line did not set the
// value .cbtrc has for it: flags win, as with cbt. The values go through
// the flags' own parsers, so a bad value is reported as a bad flag would
// be, naming the file.
func applyCBTRC(path string, g *globals, set map[string]bool) error {
	conf, err := readCBTRC(path)
	if err != nil || len(conf) == 0 {
		return err
	}
	fs := flag.NewFlagSet("cbtrc", flag.ContinueOnError)
	g.define(fs)
	for key, val := range conf {
		if set[key] {
			continue
		}
		if err := fs.Set(key, val); err != nil {
			return fmt.Errorf("%s: %s = %q: %v", path, key, val, err)
		}
		if g.fromFile == nil {
			g.fromFile = map[string]string{}
		}
		g.fromFile[key] = path
	}
	return nil
}

// source names where global flag name's value came from, for messages:
// "-timeout", or "timeout in /home/u/.cbtrc" when .cbtrc gave it.
func (g *globals) source(name string) string {
	if path, ok := g.fromFile[name]; ok {
		return name + " in " + path
	}
	return "-" + name
}

// setFlags lists the flags given on the command line, in any of fss.
func setFlags(fss ...*flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	for _, fs := range fss {
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	return set
}

// clientOptions are the connection options the global flags ask for, for
// the data client (data true) or the admin client.
func (g *globals) clientOptions(data bool) ([]option.ClientOption, error) {
	var opts []option.ClientOption
	if g.creds != "" {
		opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, g.creds))
	}
	if ep := map[bool]string{true: g.dataEndpoint, false: g.adminEndpoint}[data]; ep != "" {
		opts = append(opts, option.WithEndpoint(ep))
	}
	if g.userAgent != "" {
		opts = append(opts, option.WithUserAgent(g.userAgent))
	}
	if g.certFile != "" {
		pem, err := os.ReadFile(g.certFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.source("cert-file"), err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate in %s", g.source("cert-file"), g.certFile)
		}
		opts = append(opts, option.WithGRPCDialOption(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool}))))
	}
	return opts, nil
}
