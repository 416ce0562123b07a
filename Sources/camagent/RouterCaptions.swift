import Captions
import Logging
import Publisher
import SessionServer
import MediaTypes

/// The router's live captions: one `StreamCaptioner` per captioned stream,
/// fed by the stream's audio as the router receives it (a tap beside the
/// forwarding, which is unchanged), or, for a stream `camagent publish`
/// publishes into its own session, as its encoder makes it. The speech
/// engine is looked for once, at start: without it the router runs as ever
/// and captions say why not.
final class RouterCaptions: Sendable {
    /// Puts a tap on a stream's audio (nil takes it off); false when the stream is gone.
    typealias TapSetter = @Sendable (_ streamID: String, _ tap: (any EncodedAudioTap)?) -> Bool
    private let setTap: TapSetter
    private let recognizers: Result<WhisperRecognizerFactory, CaptionError>
    private let logger: Logger
    private let captioners = PThreadLocked<[String: StreamCaptioner]>([:])
    /// What the captioners that stopped had counted.
    private let retired = PThreadLocked(CaptionCounters())

    /// Hands one stream's audio to its captioner.
    private final class Tap: EncodedAudioTap {
        let captioner: StreamCaptioner
        init(_ captioner: StreamCaptioner) { self.captioner = captioner }
        func received(opusPayload: UnsafeRawBufferPointer) { captioner.receive(opusPayload: opusPayload) }
    }

    /// `configuration` nil: the install's (`WhisperConfiguration()`, which reads the environment).
    convenience init(router: StreamRouter, configuration: WhisperConfiguration? = nil, logger: Logger) {
        self.init(configuration: configuration, logger: logger) { id, tap in router.setAudioTap(streamID: id, tap) }
    }

    init(configuration: WhisperConfiguration? = nil, logger: Logger, setTap: @escaping TapSetter) {
        self.setTap = setTap
        self.logger = logger
        do throws(CaptionError) {
            let configuration = try WhisperConfiguration.given(configuration)
            recognizers = .success(try WhisperRecognizerFactory(configuration: configuration))
            let voice = configuration.voiceDetection == .silero ? "Silero (\(configuration.voiceModelPath))" : "by level"
            logger.info("captions: engine \(configuration.libraryPath), model \(configuration.modelPath), voice detection \(voice)")
        } catch {
            recognizers = .failure(error)
            logger.notice("captions: unavailable: \(error)")
        }
    }

    var unavailable: String? {
        if case .failure(let error) = recognizers { return "\(error)" }
        return nil
    }

    /// Starts captioners for `wanted`, stops those of `candidates` not in it.
    func set(_ wanted: Set<String>, among candidates: Set<String>, partials: Bool,
             onCaption: @escaping @Sendable (String, String, Bool) -> Void) -> [String: String] {
        var failed: [String: String] = [:]
        let running = captioners.withLock { Set($0.keys) }
        for id in candidates.intersection(running).subtracting(wanted) { stop(streamID: id) }
        for id in wanted.subtracting(running) {
            let factory: WhisperRecognizerFactory
            switch recognizers {
            case .success(let f): factory = f
            case .failure(let error):
                failed[id] = "\(error)"
                continue
            }
            do {
                let captioner = try StreamCaptioner(streamID: id, recognizers: factory, settings: .init(partials: partials),
                                                    logger: logger) { caption in
                    onCaption(id, caption.text, caption.isFinal)
                }
                guard setTap(id, Tap(captioner)) else {
                    captioner.stop()
                    failed[id] = "the stream has ended"
                    continue
                }
                captioners.withLock { $0[id] = captioner }
            } catch {
                failed[id] = "\(error)"
            }
        }
        return failed
    }

    /// The stream's captions end (captions stopped, or the stream ended).
    func stop(streamID: String) {
        guard let captioner = captioners.withLock({ $0.removeValue(forKey: streamID) }) else { return }
        _ = setTap(streamID, nil)
        captioner.stop()
        let counted = captioner.statistics
        retired.withLock { $0 = $0 + counted }
        logger.info("captions: stream \(streamID) no longer captioned (\(counted.finals) finals, \(counted.partials) partials)")
    }

    func stopAll() {
        for id in captioners.withLock({ Array($0.keys) }) { stop(streamID: id) }
    }

    var totals: CaptionTotals {
        let live = captioners.withLock { Array($0.values) }
        let sum = live.map(\.statistics).reduce(retired.withLock { $0 }, +)
        return CaptionTotals(captionedStreams: live.count, partials: sum.partials, finals: sum.finals,
                             audioSeconds: sum.audioSeconds, engineSeconds: sum.engineSeconds, packetsDropped: sum.packetsDropped,
                             earlyFinalsDiscarded: sum.earlyFinalsDiscarded)
    }
}
