package proxytest

import (
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzParseBasic checks that parseBasic never panics on what a client may send and that it
// returns exactly the credentials a well-formed header carries.
func FuzzParseBasic(f *testing.F) {
	f.Add("alice", "s3cret")
	f.Add("", "")
	f.Add("a", "p:with:colons")
	f.Add("ünï", "c\x00de")
	f.Fuzz(func(t *testing.T, user, pass string) {
		// Anything at all, as a raw header value.
		parseBasic(user + pass)
		parseBasic("Basic " + user)

		if strings.Contains(user, ":") {
			return // Basic credentials cannot carry such a user
		}
		header := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
		gotUser, gotPass, ok := parseBasic(header)
		if !ok || gotUser != user || gotPass != pass {
			t.Errorf("parseBasic(%q) = %q, %q, %t, want %q, %q, true", header, gotUser, gotPass, ok, user, pass)
		}
	})
}

func TestParseBasic(t *testing.T) {
	tests := []struct {
		header     string
		user, pass string
		ok         bool
	}{
		{"Basic YWxpY2U6czNjcmV0", "alice", "s3cret", true},
		{"basic YWxpY2U6czNjcmV0", "alice", "s3cret", true},
		{"Basic  YWxpY2U6czNjcmV0 ", "alice", "s3cret", true},
		{"Bearer YWxpY2U6czNjcmV0", "", "", false},
		{"Basic !!!", "", "", false},
		{"Basic YWxpY2U=", "alice", "", false}, // no colon
		{"", "", "", false},
	}
	for i, tt := range tests {
		user, pass, ok := parseBasic(tt.header)
		if user != tt.user || pass != tt.pass || ok != tt.ok {
			t.Errorf("step %d: parseBasic(%q) = %q, %q, %t, want %q, %q, %t",
				i, tt.header, user, pass, ok, tt.user, tt.pass, tt.ok)
		}
	}
}
