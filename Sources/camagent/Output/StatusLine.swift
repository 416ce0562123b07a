import MediaTypes
import SystemdSupport
#if canImport(Glibc)
import Glibc
#endif

/// A line rewritten in place on a terminal (a plain line each time otherwise).
final class StatusLine: Sendable {
    private let shown = PThreadLocked(false)

    func show(_ text: String) {
        shown.withLock { shown in
            if isatty(2) != 0 {
                OutputQueue.standard.enqueue(2, "\r\u{1B}[K" + text)
                shown = true
            } else {
                printError(text)
            }
        }
    }

    func finish() {
        shown.withLock { shown in
            if shown { OutputQueue.standard.enqueue(2, "\n"); shown = false }
        }
    }
}
