package store

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
)

func TestTemplatesAliasesTagsAndBuilds(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		now := time.Now().UTC()
		ensure := func(org, id, alias string) (*Template, bool) {
			t.Helper()
			var got *Template
			var created bool
			err := db.Tx(ctx, func(tx *sql.Tx) error {
				var err error
				got, created, err = EnsureTemplateTx(ctx, tx, &Template{ID: id, OrgID: org, Alias: alias, Kind: template.KindBuild,
					CPUCount: 2, MemoryMB: 1024, CreatedAt: now, UpdatedAt: now})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return got, created
		}
		a, created := ensure("o1", "t1", "web")
		if !created || a.ID != "t1" {
			t.Fatalf("first ensure: %+v %v", a, created)
		}
		if b, created := ensure("o1", "t2", "web"); created || b.ID != "t1" {
			t.Fatalf("the same alias made another template: %+v", b)
		}
		if b, created := ensure("o2", "t3", "web"); !created || b.ID != "t3" {
			t.Fatalf("another org's alias: %+v %v", b, created)
		}
		ensure("o1", "t4", "") // no alias: always a new one
		ensure("o1", "t5", "")

		if got, err := db.TemplateByRef(ctx, "o1", "web"); err != nil || got.ID != "t1" {
			t.Fatalf("by alias: %+v %v", got, err)
		}
		if _, err := db.TemplateByRef(ctx, "o2", "t1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another org's template was found: %v", err)
		}

		b1 := &TemplateBuild{ID: "b1", TemplateID: "t1", OrgID: "o1", Status: template.StatusWaiting, Spec: "{}", CPUCount: 2, MemoryMB: 1024, CreatedAt: now, UpdatedAt: now}
		b2 := *b1
		b2.ID, b2.CreatedAt = "b2", now.Add(time.Second)
		for _, b := range []*TemplateBuild{b1, &b2} {
			if err := db.Tx(ctx, func(tx *sql.Tx) error { return InsertBuildTx(ctx, tx, b, []string{template.DefaultTag}) }); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := db.BuildOfTag(ctx, "t1", template.DefaultTag); err != nil || got.ID != "b2" {
			t.Fatalf("default after two builds: %+v %v", got, err)
		}
		if err := db.SetTags(ctx, "t1", "b1", []string{"stable"}, now); err != nil {
			t.Fatal(err)
		}
		tags, _ := db.Tags(ctx, "t1")
		if len(tags) != 2 || tags[0].Tag != "default" || tags[1].Tag != "stable" || tags[1].BuildID != "b1" {
			t.Fatalf("tags: %+v", tags)
		}

		b1.Status, b1.Image, b1.SizeBytes, b1.FinishedAt = template.StatusReady, "img:1", 42, now
		if ok, err := db.UpdateBuild(ctx, b1); !ok || err != nil {
			t.Fatalf("finishing a build: %v %v", ok, err)
		}
		b1.Status = template.StatusError
		if ok, _ := db.UpdateBuild(ctx, b1); ok {
			t.Fatal("a finished build changed")
		}
		if n, _ := TemplateBytes(ctx, db.r, "o1"); n != 42 {
			t.Fatalf("bytes: %d", n)
		}

		if err := db.AppendBuildLog(ctx, "b1", []BuildLogEntry{{At: now, Level: "info", Message: "one"}, {At: now, Level: "info", Message: "two"}}); err != nil {
			t.Fatal(err)
		}
		_ = db.AppendBuildLog(ctx, "b1", []BuildLogEntry{{At: now, Level: "error", Message: "three"}})
		if l, _ := db.BuildLog(ctx, "b1", 1, 10); len(l) != 2 || l[0].Message != "two" || l[1].N != 2 {
			t.Fatalf("log from 1: %+v", l)
		}

		page, _ := db.TemplatePage(ctx, "o1", "", time.Time{}, "", 2)
		if len(page) != 2 {
			t.Fatalf("page: %d", len(page))
		}
		rest, _ := db.TemplatePage(ctx, "o1", "", page[1].CreatedAt, page[1].ID, 10)
		if len(rest) != 1 {
			t.Fatalf("second page: %d", len(rest))
		}

		images, err := db.DeleteTemplate(ctx, "o1", "t1")
		if err != nil || len(images) != 1 || images[0] != "img:1" {
			t.Fatalf("delete: %v %v", images, err)
		}
		if _, err := db.DeleteTemplate(ctx, "o2", "t4"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another org deleted a template: %v", err)
		}
		if tags, _ := db.Tags(ctx, "t1"); len(tags) != 0 {
			t.Fatalf("tags outlived their template: %+v", tags)
		}

		one := 3
		if err := db.SetTemplateQuotas(ctx, "o1", TemplateQuotas{MaxTemplates: &one}); err != nil {
			t.Fatal(err)
		}
		ensure("o1", "t6", "") // o1 now has t4, t5, t6
		err = db.Tx(ctx, func(tx *sql.Tx) error {
			_, _, err := EnsureTemplateTx(ctx, tx, &Template{ID: "t7", OrgID: "o1", Kind: template.KindSnapshot, CreatedAt: now, UpdatedAt: now})
			return err
		})
		if !errors.Is(err, ErrTemplateLimit) {
			t.Fatalf("past the quota: %v", err)
		}
	})
}
