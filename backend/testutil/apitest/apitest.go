// Package apitest sends requests to a backend under test and checks every
// answer against the API document (apitypes/openapi.yaml), so the black-box
// suites also prove that what the server says is what the document, and so
// the generated client types, say.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
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
	req, err := http.NewRequestWithContext(context.Background(), method, baseURL+path, rd)
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
	if err := CheckResponse(req, res.StatusCode, res.Header, data); err != nil {
		t.Errorf("%s %s answered %d, which does not match the OpenAPI document (apitypes/openapi.yaml): %v\nbody: %.2000s",
			method, path, res.StatusCode, err, data)
	}
	return Response{Code: res.StatusCode, Body: data, Header: res.Header}
}

// router finds the operation of a request in the API document; the
// document's servers are dropped so any test server's address matches.
var router = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(apitypes.OpenAPIYAML)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	doc.Servers = nil
	return gorillamux.NewRouter(doc)
})

// CheckResponse reports how an answer to req differs from what the API
// document says the operation answers with that status: its headers, its
// content type and its body (each line of an NDJSON stream). A success the
// operation does not list is a mismatch; an error status it does not list
// must still be the error envelope (the document's Error). A request the
// document has no operation for (unknown paths, the traffic router's
// forwarded paths) is not checked.
func CheckResponse(req *http.Request, status int, header http.Header, body []byte) error {
	rt, err := router()
	if err != nil {
		return fmt.Errorf("loading the document: %w", err)
	}
	route, params, err := rt.FindRoute(req)
	if err != nil {
		return nil // not an operation of the document
	}
	ct, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	if rs := route.Operation.Responses; rs.Status(status) == nil && rs.Default() == nil {
		if status < 400 {
			return fmt.Errorf("status %d is not one the operation answers", status)
		}
		return checkEnvelope(route.Spec, ct, body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{MultiError: true, ExcludeResponseBody: ct == "application/x-ndjson"},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return err
	}
	if ct != "application/x-ndjson" {
		return nil
	}
	ref := route.Operation.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return nil
	}
	mt := ref.Value.Content.Get(ct)
	if mt == nil {
		return fmt.Errorf("the operation does not answer %s with status %d", ct, status)
	}
	if mt.Schema == nil {
		return nil
	}
	lines := bufio.NewScanner(bytes.NewReader(body))
	lines.Buffer(nil, 16<<20)
	for n := 1; lines.Scan(); n++ {
		var v any
		if err := json.Unmarshal(lines.Bytes(), &v); err != nil {
			return fmt.Errorf("NDJSON line %d is not JSON: %w", n, err)
		}
		if err := mt.Schema.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
			return fmt.Errorf("NDJSON line %d: %w", n, err)
		}
	}
	return lines.Err()
}

// checkEnvelope checks an error answer the operation does not list against
// the document's Error schema.
func checkEnvelope(doc *openapi3.T, ct string, body []byte) error {
	if ct != "application/json" {
		return fmt.Errorf("an error answered as %q, not as the JSON error envelope", ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("an error answer that is not JSON: %w", err)
	}
	ref := doc.Components.Schemas["Error"]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("the document has no Error schema")
	}
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("an error answer that is not the error envelope: %w", err)
	}
	return nil
}
