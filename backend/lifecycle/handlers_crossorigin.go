package lifecycle

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// Every {port}-{id}.{domain} host is one site: a browser counts another
// sandbox's page as "same-site" and sends its SameSite=Lax traffic cookie
// on that page's POST to this sandbox. A state-changing request carrying
// the traffic cookie is therefore refused when the browser says it came
// from another origin that is not this sandbox's (crossSandbox): a page in
// one sandbox cannot act, through a logged-in browser, on another. Pages
// of the same sandbox on another port (a frontend on 3000 calling its API
// on 8000) are the same owner's code and pass; so do requests that carry
// the token in a header (a page cannot read the cookie to set one).

// safeMethod: the methods a browser may send across sites as navigation,
// which change nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// crossSandbox refuses (403) a state-changing, cookie-authenticated
// request to sandbox id that Origin or Sec-Fetch-Site says another origin
// made.
func crossSandbox(r *http.Request, id string) error {
	if safeMethod(r.Method) {
		return nil
	}
	if _, err := r.Cookie(trafficCookie); err != nil {
		return nil
	}
	origin := r.Header.Get("Origin")
	var from string
	switch {
	case origin != "":
		u, err := url.Parse(origin)
		if origin == "null" || err != nil || u.Host == "" {
			from = fmt.Sprintf("an opaque origin (Origin: %.100q)", origin)
		} else if !sameSandbox(u.Host, r.Host, id) {
			from = fmt.Sprintf("%.200s", origin)
		}
	default:
		if site := strings.ToLower(r.Header.Get("Sec-Fetch-Site")); site == "same-site" || site == "cross-site" {
			from = "another site's page (Sec-Fetch-Site: " + site + ")"
		}
	}
	if from == "" {
		return nil
	}
	return httpx.NewError(http.StatusForbidden, "cross_origin_request", fmt.Sprintf(
		"a %s to sandbox %s came from %s with this sandbox's traffic cookie: a page of another origin cannot change anything through the browser's cookie. "+
			"Send the request from the sandbox's own pages, or send the token in the X-Access-Token header",
		r.Method, id, from))
}

// sameSandbox reports whether the origin's host is the request's own, or
// a {port}-{id}… host of the same sandbox under the same parent domain.
func sameSandbox(originHost, requestHost, id string) bool {
	if strings.EqualFold(originHost, requestHost) {
		return true
	}
	label, parent, _ := strings.Cut(hostOf(originHost), ".")
	_, reqParent, _ := strings.Cut(hostOf(requestHost), ".")
	_, rest, ok := strings.Cut(label, "-")
	oid, _, _ := strings.Cut(rest, "-")
	return ok && oid == id && parent == reqParent
}
