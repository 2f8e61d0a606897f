package e2etrace

// Traced is traced, for the external tests.
var Traced = traced
