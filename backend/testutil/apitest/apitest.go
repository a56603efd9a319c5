// Package apitest sends requests to a backend under test.
package apitest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Response is what the server answered.
type Response struct {
	Code   int
	Body   []byte
	Header http.Header
}

// Do sends method baseURL+path. body is nil, a string or []byte (sent as
// is), or a value sent as JSON; headers are name, value pairs (pairs with an
// empty value are left out, e.g. no API key).
func Do(t testing.TB, baseURL, method, path string, body any, headers ...string) Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, baseURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return Response{Code: res.StatusCode, Body: data, Header: res.Header}
}
