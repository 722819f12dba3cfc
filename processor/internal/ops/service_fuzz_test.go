package ops

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzKeyRequest checks parseKeyRequest, the parser of every micro request
// body: it never panics; it accepts exactly the bodies that are empty or
// one JSON object (null included) decoding as a KeyRequest with valid
// UTF-8 strings, within the size limit; every refusal is an ErrBadRequest
// (so the endpoint answers 400); and an accepted request survives a
// marshal and parse round trip unchanged.
func FuzzKeyRequest(f *testing.F) {
	for _, s := range []string{"", `{"pipeline":"sensors","key":"s1"}`, `{"pipeline":"p"}`, `{}`, `null`, `[]`, `{"key":1}`,
		`{"pipeline":"a"} {}`, `{"pipeline":"\udc00"}`, `{"pipeline":"a","extra":[1,2]}`, "{\"key\":\"\xff\"}", `{"pipeline":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kr, err := parseKeyRequest(data)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) || StatusOf(err) != "400" {
				t.Fatalf("%q: error %v is not a bad request (400)", data, err)
			}
			if kr != (KeyRequest{}) {
				t.Fatalf("%q: refused but returned %+v", data, kr)
			}
			return
		}
		if len(data) > maxRequest {
			t.Fatalf("%q: accepted a body over the limit", data)
		}
		if len(data) > 0 && strings.TrimSpace(string(data)) != "null" {
			var probe map[string]json.RawMessage
			if json.Unmarshal(data, &probe) != nil {
				t.Fatalf("%q: accepted, but it is not one JSON object", data)
			}
		}
		b, err := json.Marshal(kr)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseKeyRequest(b)
		if err != nil || again != kr {
			t.Fatalf("%q: round trip %q gave %+v, %v; want %+v", data, b, again, err, kr)
		}
	})
}
