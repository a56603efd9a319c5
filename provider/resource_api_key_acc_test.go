package provider

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// TestAccAPIKey_lifecycle makes a full and a read key, uses their secrets
// from state against the API (the read key refused a write), imports one,
// revokes one out of band (the plan re-creates it), and checks after the
// destroy that every key is refused with 401.
func TestAccAPIKey_lifecycle(t *testing.T) {
	b := testAccPreCheck(t, "")
	cfg := b.providerConfig() + `
resource "dreadnode_api_key" "ci" {
  name = "acc ci"
}
resource "dreadnode_api_key" "ro" {
  name       = "acc dashboard"
  scope      = "read"
  expires_at = "2099-12-31T23:59:59Z"
}
`
	var ciID, ciKey, roKey string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             b.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestMatchResourceAttr("dreadnode_api_key.ci", "id", reKeyID),
					resource.TestCheckResourceAttr("dreadnode_api_key.ci", "scope", "full"),
					resource.TestCheckResourceAttr("dreadnode_api_key.ro", "scope", "read"),
					resource.TestCheckResourceAttr("dreadnode_api_key.ro", "expires_at", "2099-12-31T23:59:59Z"),
					resource.TestMatchResourceAttr("dreadnode_api_key.ci", "created_at", reRFC3339),
					captureAttr("dreadnode_api_key.ci", "id", &ciID),
					captureAttr("dreadnode_api_key.ci", "key", &ciKey),
					captureAttr("dreadnode_api_key.ro", "key", &roKey),
					func(*terraformState) error { return b.keyAnswers(ciKey, true) },
					func(*terraformState) error { return b.keyAnswers(roKey, false) },
				),
			},
			{
				ResourceName:            "dreadnode_api_key.ro",
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"key"},
			},
			{
				// Revoked outside Terraform: Read drops it, the plan makes a new one.
				PreConfig: func() {
					if err := b.client.RevokeAPIKey(context.Background(), b.Org, ciID); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("dreadnode_api_key.ci", plancheck.ResourceActionCreate),
						plancheck.ExpectResourceAction("dreadnode_api_key.ro", plancheck.ResourceActionNoop),
					},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					attrDiffers("dreadnode_api_key.ci", "id", &ciID),
					attrDiffers("dreadnode_api_key.ci", "key", &ciKey),
					func(s *terraformState) error {
						if err := b.apiKeyRefused(ciID, ciKey); err != nil {
							return err
						}
						return b.keyAnswers(s.RootModule().Resources["dreadnode_api_key.ci"].Primary.Attributes["key"], true)
					},
				),
			},
		},
	})
}

// keyAnswers checks that secret reads the org's keys (200) and that a
// write with it is allowed (full) or refused with 403 (read).
func (b *accBackend) keyAnswers(secret string, full bool) error {
	c, err := b.clientWith(secret)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := c.ListAPIKeys(ctx, b.Org); err != nil {
		return fmt.Errorf("GET keys with the key from state: %v", err)
	}
	k, err := c.CreateAPIKey(ctx, b.Org, client.APIKeyCreate{Name: "acc probe"})
	switch {
	case full && err != nil:
		return fmt.Errorf("POST keys with a full key: %v", err)
	case full:
		return b.client.RevokeAPIKey(ctx, b.Org, k.Id)
	case err == nil:
		_ = b.client.RevokeAPIKey(ctx, b.Org, k.Id)
		return fmt.Errorf("POST keys with a read key made key %s, want 403", k.Id)
	case client.StatusOf(err) != http.StatusForbidden:
		return fmt.Errorf("POST keys with a read key: %v, want 403", err)
	}
	return nil
}

// apiKeyRefused checks that key id is no longer listed and its secret is
// refused with 401.
func (b *accBackend) apiKeyRefused(id, secret string) error {
	ctx := context.Background()
	keys, err := b.client.ListAPIKeys(ctx, b.Org)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.Id == id {
			return fmt.Errorf("API key %s is still listed after destroy", id)
		}
	}
	if secret == "" {
		return nil
	}
	c, err := b.clientWith(secret)
	if err != nil {
		return err
	}
	// Revocation reaches every replica within 1 s (API §11).
	return eventually(5*time.Second, func() error {
		if _, err := c.ListAPIKeys(ctx, b.Org); client.StatusOf(err) != http.StatusUnauthorized {
			return fmt.Errorf("GET keys with revoked key %s: %v, want 401", id, err)
		}
		return nil
	})
}

var reKeyID = regexp.MustCompile(`^key_[A-Za-z0-9]+$`)

// clientWith is an API client of the backend using secret.
func (b *accBackend) clientWith(secret string) (*client.Client, error) {
	return client.New(client.Config{BaseURL: b.URL, APIKey: secret, UserAgent: "terraform-provider-dreadnode/acctest"})
}

// TestAccAPIKey_expired: the API still lists an expired key, but it is
// refused, so Read drops it and the plan makes a new one.
func TestAccAPIKey_expired(t *testing.T) {
	b := testAccPreCheck(t, "")
	cfg := b.providerConfig() + fmt.Sprintf(`
resource "dreadnode_api_key" "short" {
  name       = "acc short-lived"
  expires_at = %q
}
`, time.Now().Add(5*time.Second).UTC().Format(time.RFC3339))
	var key string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check:  captureAttr("dreadnode_api_key.short", "key", &key),
			},
			{
				PreConfig: func() {
					c, err := b.clientWith(key)
					if err != nil {
						t.Fatal(err)
					}
					if err := eventually(20*time.Second, func() error {
						if _, err := c.ListAPIKeys(context.Background(), b.Org); client.StatusOf(err) != http.StatusUnauthorized {
							return fmt.Errorf("GET keys with the key past its expires_at: %v, want 401", err)
						}
						return nil
					}); err != nil {
						t.Fatal(err)
					}
				},
				Config:             cfg,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}
