/// Runs a server's `run` for the duration of `body`, which gets the port the
/// server reported on `ports` once listening; then cancels the server and
/// waits for it to end.
public func whileRunning(
    _ run: @escaping @Sendable () async throws -> Void, ports: AsyncStream<Int>,
    _ body: (_ port: Int) async throws -> Void
) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CancellationError() }
        try await body(port)
        group.cancelAll()
        try await group.waitForAll()
    }
}
