package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// checkNATSURL reports the first problem of a nats.url value: a
// comma-separated list of server URLs, each scheme://[user[:password]@]host[:port]
// with scheme nats, tls, ws or wss (nats:// is assumed without one, as the
// NATS client does), a host, a port in 1..65535 when given, and no path,
// query or fragment (except a bare "/"). Credentials are not repeated in
// the message.
func checkNATSURL(s string) error {
	for i, raw := range strings.Split(s, ",") {
		u := strings.TrimSpace(raw)
		which := ""
		if strings.Contains(s, ",") {
			which = fmt.Sprintf("URL %d of the list: ", i+1)
		}
		if u == "" {
			return fmt.Errorf("%san empty URL (a stray comma?)", which)
		}
		if err := checkOneURL(u); err != nil {
			return fmt.Errorf("%s%w", which, err)
		}
	}
	return nil
}

func checkOneURL(s string) error {
	full := s
	if !strings.Contains(s, "://") {
		full = "nats://" + s
	}
	u, err := url.Parse(full)
	if err != nil || u.Opaque != "" {
		return fmt.Errorf("%q is not a URL: want nats://host:port (schemes nats, tls, ws, wss; comma-separated for several servers)", redactURL(s))
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return fmt.Errorf("%q: scheme %q is not one of nats, tls, ws, wss", redactURL(s), u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%q has no host: want %s://host:port", redactURL(s), u.Scheme)
	}
	if strings.ContainsAny(host, " \t") || (net.ParseIP(host) == nil && !validHostname(host)) {
		return fmt.Errorf("%q: %q is not a host name or IP address", redactURL(s), host)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %q is not in 1..65535", redactURL(s), p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("%q: empty port", redactURL(s))
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: a NATS server URL has no path, query or fragment", redactURL(s))
	}
	return nil
}

// validHostname reports whether h is a DNS name: labels of letters,
// digits, '-' and '_', separated by dots.
func validHostname(h string) bool {
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return len(h) <= 253
}

// redactURL hides a password or token in a URL for a message.
func redactURL(s string) string {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start := strings.Index(s, "://")
	if start < 0 || start > at {
		start = 0
	} else {
		start += 3
	}
	user := s[start:at]
	if name, _, ok := strings.Cut(user, ":"); ok {
		return s[:start] + name + ":xxxxx" + s[at:]
	}
	return s[:start] + "xxxxx" + s[at:]
}
