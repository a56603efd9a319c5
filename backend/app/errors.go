package app

import (
	"net/http"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

func insufficientCredits(org string) error {
	return httpx.NewError(http.StatusPaymentRequired, "insufficient_credits",
		"organization "+org+" has no credits left; ask an operator to grant credits (dreadnode-backend credits grant --org "+org+" --amount N)")
}
