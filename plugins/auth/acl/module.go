package acl

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module registers the ACL plugin.
var Module = fx.Module("auth.acl", fx.Provide(kernel.AsAuth(NewProvider)))
