// Package volumes serves org volumes (API.md §14): named, per org,
// persistent until deleted, mountable by several sandboxes of the org at
// once (a create's volumeMounts), refused to another org (404). A volume is
// a row (store/volumes.go) and a provider volume named from its id
// (compute.VolumeProvider); deleting one that a live sandbox mounts is
// refused (409) naming the sandboxes. The org's quotas bound their number
// and their measured disk bytes (admission.Quotas).
package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Name bounds: E2B's NewVolume.name pattern, and a length that keeps the
// provider's names short.
const MaxNameLength = 64

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Service creates, lists and deletes org volumes.
type Service struct {
	db   *store.DB
	prov compute.VolumeProvider // nil: the provider holds no volumes
	name string                 // the provider's name, recorded on each volume
	log  *slog.Logger
}

// New returns the service; prov holds the volumes when it implements
// compute.VolumeProvider (otherwise every create is refused).
func New(db *store.DB, prov compute.Provider, log *slog.Logger) *Service {
	s := &Service{db: db, name: prov.Name(), log: log}
	s.prov, _ = prov.(compute.VolumeProvider)
	return s
}

// CheckName refuses a name E2B would refuse, naming the field.
func CheckName(field, name string) error {
	switch {
	case name == "":
		return domain.Invalid(field, "is required: letters, digits, '_' and '-'")
	case len(name) > MaxNameLength:
		return domain.Invalid(field, fmt.Sprintf("must be at most %d characters", MaxNameLength))
	case !namePattern.MatchString(name):
		return domain.Invalid(field, "may hold only letters, digits, '_' and '-'")
	}
	return nil
}

// ErrExists is the error of a create whose name the org already uses.
type ErrExists struct{ Name string }

func (e *ErrExists) Error() string {
	return fmt.Sprintf("the organization already has a volume named %q; pick another name or delete that volume first", e.Name)
}

// Create makes the org's volume name: refused when the name is taken
// (*ErrExists), or past the org's quotas (max_volumes,
// max_volume_bytes).
func (s *Service) Create(ctx context.Context, org, name string) (*store.Volume, error) {
	if err := CheckName("name", name); err != nil {
		return nil, err
	}
	if s.prov == nil {
		return nil, &domain.RejectedError{Detail: fmt.Sprintf("the %s provider holds no volumes", s.name)}
	}
	q, err := admission.QuotasOf(ctx, s.db.Reader(), org)
	if err != nil {
		return nil, err
	}
	if err := s.checkBytes(ctx, org, q); err != nil {
		return nil, err
	}
	maxCount := 0
	if q.MaxVolumes != nil {
		if *q.MaxVolumes == 0 {
			return nil, &domain.QuotaExceededError{Detail: "max_volumes: the organization's max_volumes quota is 0, so it may not make volumes; ask an operator to raise it"}
		}
		maxCount = *q.MaxVolumes
	}
	v := &store.Volume{ID: "vol_" + ids.New(), OrgID: org, Name: name, Provider: s.name}
	switch err := s.db.CreateVolume(ctx, v, maxCount); {
	case errors.Is(err, store.ErrVolumeExists):
		return nil, &ErrExists{Name: name}
	case errors.Is(err, store.ErrVolumeCount):
		return nil, domain.Conflict(fmt.Sprintf("max_volumes: the organization holds %d volumes, its max_volumes quota; delete one (DELETE /volumes/{volumeID}) or ask an operator to raise it", maxCount))
	case err != nil:
		return nil, err
	}
	if err := s.prov.CreateVolume(ctx, compute.VolumeSpec{ID: v.ID, OrgID: org, Name: name}); err != nil {
		if derr := s.db.DeleteVolume(context.WithoutCancel(ctx), org, v.ID); derr != nil {
			s.log.Warn("forgetting a volume the provider did not make failed", "volume", v.ID, "err", derr)
		}
		return nil, fmt.Errorf("making volume %q: %w", name, err)
	}
	return v, nil
}

// checkBytes refuses a create once the org's volumes measured
// max_volume_bytes or more.
func (s *Service) checkBytes(ctx context.Context, org string, q admission.Quotas) error {
	if q.MaxVolumeBytes == nil {
		return nil
	}
	s.Measure(ctx)
	_, used, err := s.db.VolumeUsage(ctx, org)
	if err != nil {
		return err
	}
	if used >= *q.MaxVolumeBytes {
		return domain.Conflict(fmt.Sprintf("max_volume_bytes: the organization's volumes hold %d bytes, at or over its max_volume_bytes quota of %d; free space or delete a volume, or ask an operator to raise it",
			used, *q.MaxVolumeBytes))
	}
	return nil
}

// Measure records the disk use of every volume as the provider measures
// it (for Docker at most once a minute; see compute.VolumeProvider).
// Failures are logged: the figures stay as last measured.
func (s *Service) Measure(ctx context.Context) {
	if s.prov == nil {
		return
	}
	sizes, err := s.prov.VolumeBytes(ctx)
	if err != nil {
		s.log.Warn("measuring the volumes' disk use failed; keeping the last figures", "err", err)
		return
	}
	if sizes == nil {
		return
	}
	vols, err := s.db.ListVolumes(ctx, "")
	if err != nil {
		s.log.Warn("listing the volumes to record their disk use failed", "err", err)
		return
	}
	now := time.Now()
	for _, v := range vols {
		if b, ok := sizes[v.ID]; ok && (b != v.Bytes || v.BytesAt.IsZero()) {
			if err := s.db.SetVolumeBytes(ctx, v.ID, b, now); err != nil {
				s.log.Warn("recording a volume's disk use failed", "volume", v.ID, "err", err)
			}
		}
	}
}

// Get is the org's volume id (404 for another org's).
func (s *Service) Get(ctx context.Context, org, id string) (*store.Volume, error) {
	v, err := s.db.GetVolume(ctx, org, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, domain.NotFound("volume", id)
	}
	return v, err
}

// List is the org's volumes, oldest first.
func (s *Service) List(ctx context.Context, org string) ([]*store.Volume, error) {
	return s.db.ListVolumes(ctx, org)
}

// Usage is the org's volume count and their disk bytes as last measured.
func (s *Service) Usage(ctx context.Context, org string) (count int, bytes int64, err error) {
	s.Measure(ctx)
	return s.db.VolumeUsage(ctx, org)
}

// MountedBy lists the sandboxes of org not yet ended that mount volume id.
func (s *Service) MountedBy(ctx context.Context, org, id string) ([]string, error) {
	recs, err := s.db.ListRecords(ctx, store.RecordFilter{OrgID: org, Phases: sandbox.NonTerminal})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range recs {
		for _, m := range r.Spec.Volumes {
			if m.VolumeID == id {
				out = append(out, r.ID)
				break
			}
		}
	}
	return out, nil
}

// Delete removes the org's volume id and its contents: refused (409,
// naming them) while sandboxes that mount it have not ended.
func (s *Service) Delete(ctx context.Context, org, id string) error {
	v, err := s.Get(ctx, org, id)
	if err != nil {
		return err
	}
	users, err := s.MountedBy(ctx, org, id)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return domain.Conflict(fmt.Sprintf("volume %q is mounted by sandbox(es) %s; delete them first (or wait for them to end), then delete the volume",
			v.Name, strings.Join(users, ", ")))
	}
	if s.prov != nil {
		if err := s.prov.DeleteVolume(ctx, id); err != nil {
			if compute.KindOf(err) == compute.KindConflict {
				return domain.Conflict(fmt.Sprintf("volume %q is still mounted by a sandbox being removed; retry in a few seconds", v.Name))
			}
			return fmt.Errorf("deleting volume %q: %w", v.Name, err)
		}
	}
	if err := s.db.DeleteVolume(ctx, org, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
