package apitypes

import (
	"fmt"
	"math"
	"math/big"
)

// CreditAmount is an amount in micro-credits, written in JSON as a number of
// credits with six decimals (12.500000): exact, never a float. The
// document's credit fields (x-go-type: CreditAmount) carry it, so the server
// renders and the client reads the same integer.
type CreditAmount int64

// MarshalJSON renders the exact decimal.
func (c CreditAmount) MarshalJSON() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalJSON reads a JSON number of credits, rounded to the nearest
// micro-credit.
func (c *CreditAmount) UnmarshalJSON(b []byte) error {
	r, ok := new(big.Rat).SetString(string(b))
	if !ok {
		return fmt.Errorf("credits: %s is not a number", b)
	}
	r.Mul(r, big.NewRat(1_000_000, 1))
	f, _ := r.Float64()
	if math.Abs(f) > math.MaxInt64 {
		return fmt.Errorf("credits: %s is out of range", b)
	}
	*c = CreditAmount(math.Round(f))
	if r.IsInt() {
		*c = CreditAmount(r.Num().Int64())
	}
	return nil
}

// String is the decimal with six places.
func (c CreditAmount) String() string {
	n := int64(c)
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	return fmt.Sprintf("%s%d.%06d", sign, n/1_000_000, n%1_000_000)
}
