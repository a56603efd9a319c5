package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/templates"
)

// newTemplates is the service of an org's own templates and snapshots
// (API §14–§15): builds on the provider's build engine, snapshots and
// image removal on the provider that keeps local images (Docker; under a
// multi provider, the first that does), uploaded COPY files in the
// database (every replica reads them; see templates/files.go), spooled
// under the data directory while they arrive.
func (a *App) newTemplates(cfg Config) *templates.Service {
	tc := templates.Config{DB: a.DB, Static: a.Provider.Templates, Logger: a.Log}
	if cfg.DataDir != "" {
		tc.SpoolDir = filepath.Join(cfg.DataDir, "template-uploads")
		if err := os.MkdirAll(tc.SpoolDir, 0o700); err != nil {
			a.Log.Warn("making the spool directory of template uploads; the system's temporary directory is used", "dir", tc.SpoolDir, "error", err)
			tc.SpoolDir = ""
		}
		// Earlier versions kept uploads here, on one replica's disk; they
		// now live in the database and clients upload again what is missing.
		_ = os.RemoveAll(filepath.Join(cfg.DataDir, "template-files"))
	}
	if b, ok := a.Provider.(compute.TemplateBuilder); ok {
		tc.Builder = b
	}
	tc.Images = imagesOf(a.Provider)
	tc.Hold = func(ctx context.Context, r *store.Record, d time.Duration, extend bool) error {
		_, err := a.Lifecycle.SetEnd(ctx, r, d, extend)
		return err
	}
	return templates.New(tc)
}

func imagesOf(p compute.Provider) templates.Images {
	if im := ownImages(p); im != nil {
		return im
	}
	if m, ok := p.(interface{ Providers() []compute.Provider }); ok {
		for _, sub := range m.Providers() {
			if im := ownImages(sub); im != nil {
				return im
			}
		}
	}
	return nil
}

// ownImages is p's committer of snapshots: the provider itself where it
// keeps local images (Docker), its Snapshots where the snapshots are the
// cloud's (E2B's snapshot templates; not a committer of forks).
func ownImages(p compute.Provider) templates.Images {
	if im, ok := p.(templates.Images); ok {
		return im
	}
	if s, ok := p.(interface{ Snapshots() compute.Committer }); ok {
		return s.Snapshots()
	}
	return nil
}

// resolveTemplate is the lifecycle's look-up of an org's own templates.
func (a *App) resolveTemplate(ctx context.Context, org, ref string) (lifecycle.OrgTemplate, bool, error) {
	r, err := a.Templates.Resolve(ctx, org, ref)
	if errors.Is(err, templates.ErrNotOrgs) {
		return lifecycle.OrgTemplate{}, false, nil
	}
	if err != nil {
		return lifecycle.OrgTemplate{}, false, err
	}
	return lifecycle.OrgTemplate{ID: r.TemplateID, Image: r.Image, CPUCount: r.CPUCount, MemoryMB: r.MemoryMB}, true, nil
}
