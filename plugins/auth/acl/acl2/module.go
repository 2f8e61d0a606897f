package acl2

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the ACL 2.0 plugin (auth.acl2.*).
var Module = fx.Module("auth.acl2", fx.Provide(kernel.AsAuth(NewProvider)))
