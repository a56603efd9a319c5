package envdsign

import (
	"errors"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// A signature made as E2B's tests make it (their generateSignature) is the
// one Sign makes: the value below is E2B's scheme computed independently
// (sha256 of "test.txt:read:user:tok", unpadded base64).
func TestSignMatchesE2B(t *testing.T) {
	if got, want := Sign("test.txt", Read, "user", "tok", nil), "v1_/1gxHnPykwSXvBIP0s92+u2DOwbYMHJG5TbPHfQbaNs"; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestCheck(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	past, future := now.Unix()-60, now.Unix()+60
	q := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	for _, c := range []struct {
		name string
		q    url.Values
		op   string
		want error
	}{
		{"valid", q("path", "a.txt", "username", "user", "signature", Sign("a.txt", Read, "user", "tok", nil)), Read, nil},
		{"valid, expiring later", q("path", "a.txt", "signature", Sign("a.txt", Write, "", "tok", &future), "signature_expiration", strconv.FormatInt(future, 10)), Write, nil},
		{"missing", q("path", "a.txt"), Read, ErrMissing},
		{"other token", q("path", "a.txt", "signature", Sign("a.txt", Read, "", "other", nil)), Read, ErrInvalid},
		{"other operation", q("path", "a.txt", "signature", Sign("a.txt", Write, "", "tok", nil)), Read, ErrInvalid},
		{"other path", q("path", "b.txt", "signature", Sign("a.txt", Read, "", "tok", nil)), Read, ErrInvalid},
		{"other user", q("path", "a.txt", "username", "root", "signature", Sign("a.txt", Read, "user", "tok", nil)), Read, ErrInvalid},
		{"expiry not signed", q("path", "a.txt", "signature", Sign("a.txt", Read, "", "tok", nil), "signature_expiration", strconv.FormatInt(future, 10)), Read, ErrInvalid},
		{"expired", q("path", "a.txt", "signature", Sign("a.txt", Read, "", "tok", &past), "signature_expiration", strconv.FormatInt(past, 10)), Read, ErrExpired},
	} {
		if err := Check(c.q, c.op, "tok", now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	var bad *BadParam
	if err := Check(q("signature", "x", "signature_expiration", "soon"), Read, "tok", now); !errors.As(err, &bad) || bad.Name != "signature_expiration" {
		t.Errorf("a non-integer expiration: %v, want a BadParam naming signature_expiration", err)
	}
}
