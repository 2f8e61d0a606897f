package acl

import "go.uber.org/goleak"

var goleakOptions []goleak.Option
