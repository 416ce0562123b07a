import MediaTypes
#if canImport(Glibc)
import Glibc
#endif

/// A line rewritten in place on a terminal (a plain line each time otherwise).
final class StatusLine: Sendable {
    private let shown = PThreadLocked(false)

    func show(_ text: String) {
        shown.withLock { shown in
            if isatty(2) != 0 {
                let line = "\r\u{1B}[K" + text
                _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
                shown = true
            } else {
                printError(text)
            }
        }
    }

    func finish() {
        shown.withLock { shown in
            if shown { _ = write(2, "\n", 1); shown = false }
        }
    }
}
