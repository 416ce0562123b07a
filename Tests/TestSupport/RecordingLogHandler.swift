import Foundation
import Logging

/// A log handler that keeps what it is given (every level), to check what a
/// call logged, or that something (a token) never reached the log.
///
/// A struct, as swift-log expects: a `Logger` copied to another task and given
/// metadata there (Hummingbird does this per connection) then gets its own copy
/// instead of writing to one shared by every thread. Only the store is shared.
public struct RecordingLogHandler: LogHandler, Sendable {
    public final class Store: @unchecked Sendable {
        private let lock = NSLock()
        private var entries: [(level: Logger.Level, message: String, metadata: String)] = []

        func append(_ level: Logger.Level, _ message: String, _ metadata: String) {
            lock.withLock { entries.append((level, message, metadata)) }
        }

        public var messages: [(level: Logger.Level, message: String)] { lock.withLock { entries.map { ($0.level, $0.message) } } }

        /// Every entry, message and metadata, one line each.
        public var text: String { lock.withLock { entries.map { "\($0.message) \($0.metadata)" }.joined(separator: "\n") } }
    }

    let store: Store
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    init(store: Store) { self.store = store }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { _, new in new }
        let flat = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        store.append(event.level, event.message.description, flat)
    }

    /// A logger at trace level whose every entry lands in the returned store.
    public static func logger(label: String = "test") -> (Logger, Store) {
        let store = Store()
        var logger = Logger(label: label) { _ in RecordingLogHandler(store: store) }
        logger.logLevel = .trace
        return (logger, store)
    }
}
