import SystemdSupport

/// A line on stdout (stdout is a pipe for scripts and tests, where a buffered
/// line would wait): queued for the output thread, never waiting for the reader.
func printLine(_ line: String) {
    OutputQueue.standard.enqueue(1, line + "\n")
}

/// A line on stderr, the same way.
func printError(_ line: String) {
    OutputQueue.standard.enqueue(2, line + "\n")
}
