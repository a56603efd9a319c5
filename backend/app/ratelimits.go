package app

import (
	"fmt"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/api"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/config"
)

// defaultRates are the per-key limits of each route class, per replica,
// and of refused keys per client address: generous for a person or a
// pipeline, tight for a runaway loop or a key guesser.
var defaultRates = map[string]api.Rate{
	api.ClassCreate: {PerSecond: 10, Burst: 100},
	api.ClassWrite:  {PerSecond: 50, Burst: 200},
	api.ClassRead:   {PerSecond: 200, Burst: 1000},
	api.ClassExec:   {PerSecond: 100, Burst: 400},
	"auth_failures": {PerSecond: 2, Burst: 20},
}

// rateLimitsFrom reads DREADNODE_RATE_<CLASS> (tokens per second; 0
// or "off": no limit) and DREADNODE_RATE_<CLASS>_BURST for the classes
// create, write, read, exec and auth_failures.
func rateLimitsFrom(e config.RateLimits) (api.RateLimits, error) {
	out := api.RateLimits{Class: map[string]api.Rate{}}
	for class, def := range defaultRates {
		v, burst, name := e.Class(class)
		r := def
		if v == "off" {
			r = api.Rate{}
		} else {
			var err error
			if r.PerSecond, err = parseFloat(name, v, def.PerSecond); err != nil {
				return out, err
			}
			if r.Burst, err = parseInt(name+"_BURST", burst, def.Burst); err != nil {
				return out, err
			}
			if r.PerSecond > 0 && r.Burst < 1 {
				return out, fmt.Errorf("%s_BURST: must be 1 or more, got %d", name, r.Burst)
			}
		}
		if class == "auth_failures" {
			out.AuthFailures = r
		} else {
			out.Class[class] = r
		}
	}
	return out, nil
}
