package billing

import (
	"context"
	"errors"
	"fmt"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Balance is the answer of the credits routes: the document's
// CreditBalance.
type Balance = apitypes.CreditBalance

// RateView is the rate table in credits per second (CreditRates).
type RateView = apitypes.CreditRates

// Balance reads an org's credits and its accrual since the last settlement.
func (s *Service) Balance(ctx context.Context, org string) (*Balance, error) {
	bal, err := s.db.OrgCredits(ctx, org)
	if errors.Is(err, store.ErrNotFound) {
		return nil, domain.NotFound("organization", org)
	}
	if err != nil {
		return nil, err
	}
	rows, err := s.db.UnsettledRecords(ctx, org)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := &Balance{Organization: org, Balance: Credits(bal), Rates: RateView{
		CPUSecond: float64(s.rates.CPUSecond) / NanoPerCredit, GiBSecond: float64(s.rates.GiBSecond) / NanoPerCredit,
		SandboxSecond: float64(s.rates.SandboxSecond) / NanoPerCredit}}
	var running, burn int64
	for i := range rows {
		b := &rows[i]
		rate := s.rates.For(b.CPUCount, b.MemoryMB)
		running += cost(int64(b.RuntimeAt(now))-b.BilledNs, rate)
		if !b.RunningSince.IsZero() {
			burn += rate
			out.RunningSandboxes++
		}
	}
	out.RunningCredits = Credits(running)
	out.EstimatedBalance = Credits(max(bal-running, 0))
	out.BurnRatePerSecond = float64(burn) / NanoPerCredit
	return out, nil
}

// Grant adds micro credits to org (an operator action) and returns the new
// balance. Unknown orgs are 404; a balance over MaxBalanceMicro is 400.
func (s *Service) Grant(ctx context.Context, org string, micro int64) (int64, error) {
	bal, err := s.db.GrantCreditsMax(ctx, org, micro, MaxBalanceMicro)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, domain.NotFound("organization", org)
	case errors.Is(err, store.ErrBalanceCap):
		return 0, domain.Invalid("amount", fmt.Sprintf("the balance would exceed %s credits", Credits(MaxBalanceMicro)))
	}
	return bal, err
}
