package remoting

// SetDirectAsyncWrites switches InvokeAsync between the writer goroutine
// (false, the default) and writing from the caller (true), for benchmarks;
// it returns the previous setting.
func SetDirectAsyncWrites(on bool) bool {
	old := directAsyncWrites
	directAsyncWrites = on
	return old
}
