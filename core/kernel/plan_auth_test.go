package kernel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/transport"
)

// aclConfig is the config of a fake auth plugin called acl.
type aclConfig struct {
	File   string            `koanf:"file"`
	Reload config.Duration   `koanf:"reload_interval"`
	Keys   map[string]string `koanf:"keys"`
}

func (c *aclConfig) Validate() error {
	if c.File == "" {
		return errors.New("file is required")
	}
	return nil
}

func authSpec() kernel.Spec {
	p := auth.Define("acl", func() *aclConfig { return &aclConfig{Reload: 2e9} },
		func(context.Context, *aclConfig, auth.Deps) (auth.Authenticator, auth.Authorizer, error) {
			return auth.AllowAll{}, auth.AllowAll{}, nil
		})
	return kernel.Spec{Plugins: kernel.Plugins{Storage: engines("pebble", "commitlog"), Transport: []transport.Provider{fakeTransport{id: "tcp"}}, Auth: []auth.Provider{p}}}
}

// TestPlanAuthSpellings: an auth plugin's section is auth.<id>; the old
// spelling <id>.* (acl.enabled) is read as auth.<id>.* with one notice,
// alone or beside the new spelling for other keys.
func TestPlanAuthSpellings(t *testing.T) {
	tests := []struct {
		name        string
		give        map[string]any
		wantNamesrv bool
		wantKeys    map[string]string
		wantNotice  string
	}{
		{name: "auth.acl", give: map[string]any{"auth.acl.enabled": true, "auth.acl.file": "a.yml"}},
		{name: "namesrv_enabled", give: map[string]any{"auth.acl.enabled": "true", "auth.acl.namesrv_enabled": "yes", "auth.acl.file": "a.yml"}, wantNamesrv: true},
		{name: "old spelling", give: map[string]any{"acl.enabled": true, "acl.file": "a.yml"},
			wantNotice: "config: acl.enabled, acl.file read as auth.acl.enabled, auth.acl.file (acl.* is the old spelling of auth.acl.*)"},
		{name: "both spellings for different keys", give: map[string]any{"auth.acl.enabled": true, "acl.file": "a.yml", "acl.keys.alice": "x", "auth.acl.keys.bob": "y"},
			wantKeys:   map[string]string{"alice": "x", "bob": "y"},
			wantNotice: "config: acl.file, acl.keys.alice read as auth.acl.file, auth.acl.keys.alice (acl.* is the old spelling of auth.acl.*)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := kernel.NewPlan(config.FromMap(tt.give), authSpec())
			require.NoError(t, err)
			require.Len(t, p.Auth, 1)
			assert.Equal(t, "acl", p.Auth[0].Provider.ID())
			want := &aclConfig{File: "a.yml", Reload: 2e9, Keys: tt.wantKeys}
			assert.Equal(t, want, p.Auth[0].Config)
			assert.Equal(t, tt.wantNamesrv, p.Auth[0].Namesrv)
			if tt.wantNotice == "" {
				assert.Empty(t, p.Notices)
			} else {
				assert.Equal(t, []string{tt.wantNotice}, p.Notices)
			}
		})
	}

	p, err := kernel.NewPlan(config.FromMap(map[string]any{"auth.acl.enabled": false}), authSpec())
	require.NoError(t, err)
	assert.Empty(t, p.Auth, "disabled")
}

// TestPlanAuthProblems: unknown keys under auth.<id> (in either spelling)
// get a suggestion in the spelling used, a key set in both spellings is
// one problem naming both, and the sources are those of the keys as set.
func TestPlanAuthProblems(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		want string
	}{
		{"unknown key", []string{"auth.acl.enabled=true", "auth.acl.file=a", "auth.acl.fiel=b"},
			"unknown key auth.acl.fiel; did you mean auth.acl.file? (from --set)"},
		{"unknown key, old spelling", []string{"acl.enabled=true", "acl.file=a", "acl.reload_intervall=1s"},
			"unknown key acl.reload_intervall; did you mean acl.reload_interval? (from --set)"},
		{"unknown key, old spelling beside the new", []string{"auth.acl.enabled=true", "auth.acl.file=a", "acl.fiel=b"},
			"unknown key auth.acl.fiel; did you mean auth.acl.file? (from --set)"},
		{"unknown plugin", []string{"auth.acll.enabled=true"},
			"unknown key auth.acll; did you mean auth.acl? (from --set)"},
		{"typo of enabled", []string{"auth.acl.enabeld=true"},
			"unknown key auth.acl.enabeld; did you mean auth.acl.enabled? (from --set)"},
		{"typo of namesrv_enabled", []string{"auth.acl.enabled=true", "auth.acl.file=a", "auth.acl.namesrv_enable=true"},
			"unknown key auth.acl.namesrv_enable; did you mean auth.acl.namesrv_enabled? (from --set)"},
		{"not a section", []string{"auth=true"},
			"auth: must be a section, one key per auth plugin (auth.<id>.enabled; registered: acl) (from --set)"},
		{"not a boolean", []string{"auth.acl.enabled=maybe"},
			`auth.acl.enabled: "maybe" is not a boolean (true or false) (from --set)`},
		{"invalid when enabled", []string{"auth.acl.enabled=on"},
			"auth.acl: file is required (from --set)"},
		{"keys of a disabled plugin", []string{"acl.file=a"},
			"acl is set but acl.enabled is false: its keys do nothing (set acl.enabled: true, or remove them) (from --set)"},
		{"both spellings", []string{"auth.acl.enabled=true", "acl.enabled=true", "auth.acl.file=a"},
			"auth.acl.enabled and acl.enabled (from --set) are both set: acl.* is the old spelling of auth.acl.*; keep one (from --set)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(config.Options{Sets: tt.sets})
			require.NoError(t, err)
			_, err = kernel.NewPlan(cfg, authSpec())
			var pe *kernel.PlanError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tt.want, pe.Error())
		})
	}
}
