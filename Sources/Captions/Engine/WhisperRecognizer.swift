#if canImport(Glibc)
import Glibc
#endif
import MediaTypes
import Synchronization

/// Where the speech engine is: scripts/install-captions puts whisper.cpp, the
/// bridge camagent loads (CModules/WhisperBridge), Whisper's tiny.en model and
/// Silero's voice activity model under one prefix.
public struct WhisperConfiguration: Sendable, Equatable {
    /// The bridge library (`libcamagent-whisper.so`), loaded at run time.
    public var libraryPath: String
    /// A ggml model file.
    public var modelPath: String
    /// How utterances are found in the audio.
    public var voiceDetection: VoiceDetection
    /// Silero's ggml model (for `.silero`).
    public var voiceModelPath: String
    /// Threads per recognition (whisper.cpp's n_threads): 1, since on two shared
    /// cores a second thread stalled calls for seconds while other work ran.
    public var threads: Int
    /// Beam width for finals (partials are greedy): a beam hears more words right on
    /// the test speech (18 % WER greedy, 11 % with 5) for more CPU and time. 3, not 5:
    /// a final comes about 150 ms sooner (a beam of 5 took 0.6-0.7 s on a 3 s sentence
    /// here), for a WER of 0.10-0.11 against 0.09-0.105 (BENCHMARKS.md, Captions).
    public var finalBeamSize: Int
    /// How much of Whisper's 30 s window the encoder attends to (its
    /// `audio_ctx`, 50 per second): nil fits it to each utterance, which keeps
    /// short utterances cheap; a number fixes it.
    public var audioContext: Int?

    public static let defaultPrefix = "/opt/camagent-captions"

    /// The install's layout under `prefix` ($CAMAGENT_CAPTIONS_PREFIX, else /opt/camagent-captions).
    /// `voiceDetection` nil: $CAMAGENT_CAPTIONS_VAD (`silero` or `level`), else Silero.
    public init(prefix: String? = nil, threads: Int = 1, finalBeamSize: Int? = nil, audioContext: Int? = nil,
                voiceDetection: VoiceDetection? = nil) throws(CaptionError) {
        let root = prefix ?? getenv("CAMAGENT_CAPTIONS_PREFIX").map { String(cString: $0) } ?? Self.defaultPrefix
        libraryPath = root + "/lib/libcamagent-whisper.so"
        modelPath = root + "/models/ggml-tiny.en.bin"
        voiceModelPath = root + "/models/ggml-silero-v6.2.0.bin"
        if let voiceDetection {
            self.voiceDetection = voiceDetection
        } else if let name = getenv("CAMAGENT_CAPTIONS_VAD").map({ String(cString: $0) }), !name.isEmpty {
            guard let chosen = VoiceDetection(rawValue: name) else { throw .unknownVoiceDetection(name) }
            self.voiceDetection = chosen
        } else {
            self.voiceDetection = .silero
        }
        self.threads = threads
        // $CAMAGENT_CAPTIONS_FINAL_BEAM: for measuring (Benchmarks/captions.py), as the VAD's.
        let beamFromEnvironment = getenv("CAMAGENT_CAPTIONS_FINAL_BEAM").flatMap { Int(String(cString: $0)) }
        // 1...16: whisper.cpp's beams are few; 3,000,000,000 trapped when made an Int32.
        self.finalBeamSize = min(16, max(1, finalBeamSize ?? beamFromEnvironment ?? 3))
        self.audioContext = audioContext
    }

    /// `configuration`, or the install's when nil.
    public static func given(_ configuration: WhisperConfiguration?) throws(CaptionError) -> WhisperConfiguration {
        if let configuration { return configuration }
        return try WhisperConfiguration()
    }

    /// The model files are there and readable (modelMissing, with why, otherwise).
    func checkModelReadable() throws(CaptionError) {
        var paths = [modelPath]
        if voiceDetection == .silero { paths.append(voiceModelPath) }
        for path in paths where access(path, R_OK) != 0 {
            throw .modelMissing(path: path, reason: String(cString: strerror(errno)))
        }
    }

    /// The encoder context for `count` samples at 16 kHz: the utterance's own
    /// length plus two seconds of margin, in steps of 64, at least 512 (about
    /// 10 s: tiny.en fell into repetition loops on a one-second partial at 192,
    /// and 512 costs little more than less), within Whisper's 1500.
    func audioContext(forSamples count: Int) -> Int {
        if let audioContext { return audioContext }
        let frames = count / 320 + 100
        return min(1500, max(512, (frames + 63) / 64 * 64))
    }
}

/// The bridge library, loaded once per process and kept: its calls.
final class WhisperLibrary: @unchecked Sendable {   // immutable after init
    typealias Open = @convention(c) (UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<CChar>?, Int) -> UnsafeMutableRawPointer?
    typealias ShouldStop = @convention(c) (UnsafeMutableRawPointer?) -> Int32
    typealias Transcribe = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<Float>?, Int32, Int32, Int32,
                                           ShouldStop?, UnsafeMutableRawPointer?,
                                           UnsafeMutablePointer<CChar>?, Int) -> Int32
    typealias Close = @convention(c) (UnsafeMutableRawPointer?) -> Void
    typealias Version = @convention(c) () -> Int32
    typealias VoiceProbability = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<Float>?, Int32,
                                                 UnsafeMutablePointer<Float>?) -> Int32

    let open: Open
    let transcribe: Transcribe
    let close: Close
    let voiceOpen: Open
    let voiceWindow: Int
    let voiceProbability: VoiceProbability
    let voiceClose: Close

    /// The ABI of CModules/WhisperBridge/whisper_bridge.c this code speaks.
    static let bridgeVersion: Int32 = 4
    /// Loading takes a while under the lock, so callers contend for it: a
    /// pthread mutex, which ThreadSanitizer can follow (see `PThreadLocked`).
    private static let loaded = PThreadLocked<[String: WhisperLibrary]>([:])

    static func load(_ path: String) throws(CaptionError) -> WhisperLibrary {
        let result = loaded.withLock { cache -> Result<WhisperLibrary, CaptionError> in
            if let library = cache[path] { return .success(library) }
            do throws(CaptionError) {
                let library = try WhisperLibrary(path: path)
                cache[path] = library
                return .success(library)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// A model context from `open` (`self.open` or `voiceOpen`); modelMissing with the bridge's reason.
    func openModel(_ open: Open, path: String, threads: Int) throws(CaptionError) -> UnsafeMutableRawPointer {
        var reason = [CChar](repeating: 0, count: 512)
        let opened = reason.withUnsafeMutableBufferPointer { buffer in
            open(path, Int32(threads), buffer.baseAddress, buffer.count)
        }
        guard let opened else { throw .modelMissing(path: path, reason: Captions.text(reason)) }
        return opened
    }

    private init(path: String) throws(CaptionError) {
        guard access(path, F_OK) == 0 else { throw .engineMissing(path: path, reason: "no such file") }
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw .engineMissing(path: path, reason: dlerror().map { String(cString: $0) } ?? "dlopen failed")
        }
        func symbol<T>(_ name: String, as type: T.Type) throws(CaptionError) -> T {
            guard let pointer = dlsym(handle, name) else {
                throw .engineMissing(path: path, reason: "the library has no \(name): not camagent's whisper bridge")
            }
            return unsafeBitCast(pointer, to: type)
        }
        let version = try symbol("cw_bridge_version", as: Version.self)()
        guard version == Self.bridgeVersion else {
            throw .engineMissing(path: path, reason: "bridge version \(version), camagent speaks \(Self.bridgeVersion): run scripts/install-captions again")
        }
        open = try symbol("cw_open", as: Open.self)
        transcribe = try symbol("cw_transcribe", as: Transcribe.self)
        close = try symbol("cw_close", as: Close.self)
        voiceOpen = try symbol("cw_vad_open", as: Open.self)
        voiceWindow = Int(try symbol("cw_vad_window", as: Version.self)())
        voiceProbability = try symbol("cw_vad_probability", as: VoiceProbability.self)
        voiceClose = try symbol("cw_vad_close", as: Close.self)
        // The handle stays open for the process's life: engines made from it may live anywhere.
    }
}

/// whisper.cpp through the bridge: one model context per recognizer.
public final class WhisperRecognizer: SpeechRecognizer {
    private let library: WhisperLibrary
    private let engine: UnsafeMutableRawPointer
    private let configuration: WhisperConfiguration
    /// The text comes back here: no allocation per call but the String.
    private var text = [CChar](repeating: 0, count: 4096)

    public init(configuration: WhisperConfiguration) throws(CaptionError) {
        let library = try WhisperLibrary.load(configuration.libraryPath)
        self.library = library
        try configuration.checkModelReadable()
        engine = try library.openModel(library.open, path: configuration.modelPath, threads: configuration.threads)
        self.configuration = configuration
    }

    deinit { library.close(engine) }

    public func transcribe(_ samples: UnsafeBufferPointer<Float>, final: Bool, stop: RecognitionStop?) throws(CaptionError) -> String {
        let context = Int32(configuration.audioContext(forSamples: samples.count))
        let beam = Int32(final ? configuration.finalBeamSize : 1)
        // whisper asks after its encoder and after each token (every 10-30 ms here); the
        // stop object outlives the call, so it goes unretained.
        let shouldStop: WhisperLibrary.ShouldStop? = stop == nil ? nil : { context in
            Unmanaged<RecognitionStop>.fromOpaque(context!).takeUnretainedValue().isRequested ? 1 : 0
        }
        let stopContext = stop.map { Unmanaged.passUnretained($0).toOpaque() }
        let written = withExtendedLifetime(stop) {
            text.withUnsafeMutableBufferPointer { buffer in
                library.transcribe(engine, samples.baseAddress, Int32(samples.count), context, beam,
                                   shouldStop, stopContext, buffer.baseAddress, buffer.count)
            }
        }
        if written == -2 { throw .recognitionStopped }
        guard written >= 0 else { throw .recognitionFailed(Captions.text(text)) }
        return Captions.text(text)
    }
}

/// The NUL-terminated text in a C buffer.
func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Whisper recognizers with one configuration; checks at creation that the
/// engine loads, so a missing install is an error at start, not at first speech.
public struct WhisperRecognizerFactory: SpeechRecognizerFactory {
    public let configuration: WhisperConfiguration

    /// `configuration` nil: the install's (`WhisperConfiguration()`, which reads the environment).
    public init(configuration: WhisperConfiguration? = nil) throws(CaptionError) {
        let configuration = try WhisperConfiguration.given(configuration)
        _ = try WhisperLibrary.load(configuration.libraryPath)
        try configuration.checkModelReadable()
        self.configuration = configuration
    }

    public func makeRecognizer() throws(CaptionError) -> any SpeechRecognizer {
        try WhisperRecognizer(configuration: configuration)
    }

    public func makeVoiceActivityModel() throws(CaptionError) -> (any VoiceActivityModel)? {
        switch configuration.voiceDetection {
        case .level: nil
        case .silero: try SileroVoiceActivity(configuration: configuration)
        }
    }
}
