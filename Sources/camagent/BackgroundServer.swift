import Foundation
import MediaTypes

/// A server's `run()` on a detached task, started and waited for from a
/// command's synchronous code (`camagent router`, `publish`'s in-process
/// router), with a timeout on the start and on the stop.
final class BackgroundServer: Sendable {
    struct StartError: Error, CustomStringConvertible { var description: String }

    private let task: Task<Void, Never>
    private let outcome: PThreadLocked<(failure: String?, ended: Bool)>
    /// Signalled when the server task has ended.
    private let ended: DispatchSemaphore

    /// Starts `run` and returns once `boundPort` says the socket is bound;
    /// throws why not: the server's own error (its errno's words), or no
    /// port within 15 s.
    init(run: @escaping @Sendable () async throws -> Void, boundPort: () -> Int?) throws(StartError) {
        let outcome = PThreadLocked<(failure: String?, ended: Bool)>((nil, false))
        let ended = DispatchSemaphore(value: 0)
        task = Task.detached {
            do { try await run() } catch { outcome.withLock { $0.failure = explainSocketError(error) } }
            outcome.withLock { $0.ended = true }
            ended.signal()
        }
        self.outcome = outcome
        self.ended = ended
        let deadline = MonotonicTimestamp.now() + .seconds(15)
        while boundPort() == nil {
            let state = outcome.withLock { $0 }
            if state.ended { throw StartError(description: state.failure ?? "the server stopped at once") }
            if MonotonicTimestamp.now() > deadline {
                stop()
                throw StartError(description: "not listening after 15 s")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    /// Why the server stopped with an error, if it did.
    var failure: String? { outcome.withLock { $0.failure } }

    /// Waits until the server ends on its own (a signal's graceful shutdown, a failure).
    func waitForEnd() { ended.wait() }

    /// Cancels the server's task (a graceful shutdown) and waits at most 10 s.
    func stop() {
        task.cancel()
        _ = ended.wait(timeout: .now() + 10)
    }
}
