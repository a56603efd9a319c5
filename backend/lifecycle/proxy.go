package lifecycle

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// RegisterRouter adds the traffic router. It authenticates with the
// sandbox's access token alone (a browser or agent reaching a preview URL has
// no API key), so it must be registered outside the API-key middleware.
func (s *Service) RegisterRouter(r *mux.Router) {
	r.PathPrefix("/sandboxes/{id}/proxy/{port:[0-9]+}").Handler(httpx.Handler(s.handleProxy))
}

func (s *Service) handleProxy(w http.ResponseWriter, r *http.Request) error {
	vars := mux.Vars(r)
	id := vars["id"]
	// No API key here: the access token, checked next, is the credential.
	rec, err := s.find(r, func(ctx context.Context, _, id string) (*store.Record, error) { return s.db.GetRecord(ctx, id) })
	if err != nil {
		return err
	}
	if err := checkAccess(r, rec); err != nil {
		return err
	}
	port, _ := strconv.Atoi(vars["port"])
	if rec.Phase == store.PhasePaused || rec.Phase == store.PhasePausing {
		if !rec.AutoResume {
			return httpx.Conflict(fmt.Sprintf("sandbox %s is paused and autoResume is off; POST /sandboxes/%s/connect to resume it", id, id))
		}
		if rec, _, err = s.Resume(r.Context(), rec); err != nil {
			return err
		}
	}
	if rec.Phase == store.PhasePending || rec.Phase == store.PhaseCreating {
		if rec, err = s.WaitStarted(r.Context(), id); err != nil {
			return err
		}
	}
	if rec.Phase != store.PhaseRunning {
		return httpx.Conflict(fmt.Sprintf("sandbox %s is %s; no traffic can reach it", id, rec.Phase.PublicState()))
	}
	ep, ok := rec.Endpoints[port]
	if !ok {
		ports := make([]string, 0, len(rec.Endpoints))
		for p := range rec.Endpoints {
			ports = append(ports, strconv.Itoa(p))
		}
		return httpx.NewError(http.StatusNotFound, "port_not_exposed",
			fmt.Sprintf("port %d of sandbox %s is not exposed; its template exposes [%s]", port, id, strings.Join(ports, ", ")))
	}
	target, err := url.Parse(ep.URL)
	if err != nil || ep.URL == "" {
		target = &url.URL{Scheme: "http", Host: ep.Host + ":" + strconv.Itoa(ep.Port)}
	}
	prefix := "/sandboxes/" + id + "/proxy/" + vars["port"]
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = "/" + strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
			pr.Out.URL.RawPath = ""
			pr.Out.Header.Del("X-Access-Token")
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			httpx.WriteErr(w, httpx.NewError(http.StatusBadGateway, "upstream_unreachable",
				fmt.Sprintf("nothing answered on port %d of sandbox %s: %v", port, id, err)))
		},
	}
	proxy.ServeHTTP(w, r)
	return nil
}
