import Foundation
import MediaTypes
import SystemdSupport

/// SIGINT and SIGTERM, taken with sigwait(2) on a thread of camagent's own.
///
/// Why not libdispatch's signal sources: a source is armed on libdispatch's
/// manager thread some time after `resume()`, and the signal had to be set to
/// SIG_IGN first; one that came in between was ignored and lost. A supervisor
/// or a test that sent SIGTERM right after camagent's first line of output
/// then waited for an exit that never came. Here both signals are blocked in
/// every thread from the first line of `main` (threads inherit the mask), so
/// one that comes early stays pending until the thread below takes it: it is
/// never lost, whenever it comes.
enum TerminationSignals {
    /// What a signal does now; nil: what it would do without camagent's help (end the process).
    private static let action = PThreadLocked<(@Sendable () -> Void)?>(nil)

    /// Blocks SIGINT and SIGTERM and starts the thread that takes them.
    /// Must run before any other thread exists: a thread started earlier
    /// would keep them unblocked and could be handed one.
    static func takeOver() {
        var both = sigset_t()
        sigemptyset(&both)
        sigaddset(&both, SIGINT)
        sigaddset(&both, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &both, nil)
        let taken = both
        let thread = Thread { waitForSignals(taken) }
        thread.name = "camagent signals"
        thread.start()
    }

    /// From now on SIGINT and SIGTERM run `handler` instead of ending the
    /// process: on the signal thread, one at a time, so it should ask for the
    /// stop and return (a second Ctrl-C waits for it).
    static func onSignal(_ handler: @escaping @Sendable () -> Void) {
        action.withLock { $0 = handler }
    }

    private static func waitForSignals(_ signals: sigset_t) -> Never {
        var signals = signals
        while true {
            var received: Int32 = 0
            guard sigwait(&signals, &received) == 0 else { continue }
            if let handler = action.withLock({ $0 }) {
                handler()
            } else {
                endProcess(by: received)
            }
        }
    }

    /// No command has taken the signal yet (or takes none): it ends camagent as it
    /// always did, killed by that signal, which a shell reports as 128 + its number.
    private static func endProcess(by received: Int32) -> Never {
        signal(received, SIG_DFL)
        var one = sigset_t()
        sigemptyset(&one)
        sigaddset(&one, received)
        pthread_sigmask(SIG_UNBLOCK, &one, nil)
        raise(received)  // delivered to this thread, now unblocked: the default action ends the process
        _exit(128 + received)
    }
}

/// Turns SIGINT/SIGTERM into a clean stop with a summary; and the reader of
/// stdout or stderr going away (`camagent publish --json | head -3`) too,
/// unless that reader was systemd's journal.
final class SignalStop: Sendable {
    init(_ action: @escaping @Sendable () -> Void) {
        TerminationSignals.onSignal(action)
        OutputQueue.standard.whenReaderGone { fd in
            // A broken journal stream stops nothing: a service that stopped with exit 0 would not
            // be restarted (Restart=on-failure), so it goes on writing nowhere, as it did before.
            // (journald keeps its streams across its own restarts: this should not happen anyway.)
            let journal = getenv("JOURNAL_STREAM").map { ["JOURNAL_STREAM": String(cString: $0)] } ?? [:]
            guard LogStyle.detect(environment: journal, fd: fd) != .journal else { return }
            printError("camagent: the reader of \(fd == 1 ? "stdout" : "stderr") went away (broken pipe); stopping")
            action()
        }
    }
}
