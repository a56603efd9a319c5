package e2bapi

import (
	"net"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/idna"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// maskPortPlaceholder in network.maskRequestHost stands for the port a
// request is routed to (E2B's pool.MaskRequestHostPortPlaceholder).
const maskPortPlaceholder = "${PORT}"

// checkMaskRequestHost refuses a network.maskRequestHost E2B's create
// refuses (its validateNetworkConfig: a host[:port] whose host is ASCII
// and a valid IDNA name), with E2B's messages. Beyond E2B, it also
// refuses one that would never be a valid Host header once ${PORT} is
// substituted, so a bad value is a 400 at create, not a 502 on every
// request later.
func checkMaskRequestHost(v string) error {
	invalid := httpx.NewError(http.StatusBadRequest, "invalid_request", "mask request host is not valid: "+v)
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		if !strings.Contains(err.Error(), "missing port") {
			return invalid
		}
		host, port = v, ""
	}
	ascii, err := idna.Display.ToASCII(host)
	if err != nil {
		return invalid
	}
	if !strings.EqualFold(ascii, host) {
		return httpx.NewError(http.StatusBadRequest, "invalid_request",
			"mask request host '"+host+"' is not ASCII. Please use ASCII characters only.")
	}
	port = strings.ReplaceAll(port, maskPortPlaceholder, "1")
	if len(v) > 255 || strings.Trim(port, "0123456789") != "" ||
		!httpguts.ValidHostHeader(strings.ReplaceAll(v, maskPortPlaceholder, "1")) {
		return invalid
	}
	return nil
}
