package controller

import (
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/modules/namesrv"
)

// Config is the namesrv.controller section (namesrv.ControllerConfig:
// it lives in the name server's section, whose role runs the controller).
type Config = namesrv.ControllerConfig

// NewConfig returns the defaults.
func NewConfig() *Config {
	c := namesrv.NewControllerConfig()
	return &c
}

// NewConfigFrom decodes the namesrv section strictly and returns its
// controller part.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	nc, err := namesrv.NewConfigFrom(cfg)
	if err != nil {
		return nil, err
	}
	return &nc.Controller, nil
}
