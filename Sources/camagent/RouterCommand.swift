import ArgumentParser
import Foundation
import Logging
import Publisher
import ServiceLifecycle
import SessionServer
import SessionServerTLS
import MediaTypes
import Networking

/// `camagent router`: the session router (DESIGN.md "Sessions"): sessions,
/// tokens, the REST API and WebSocket signalling, until SIGINT or SIGTERM.
struct RouterCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "router",
        abstract: "Run the session router: sessions, tokens, REST API, WebSocket signalling.",
        discussion: """
        The secret file holds the key every token is signed with; it is created (mode 0600) on the \
        first start. Mint tokens with `camagent token`, make sessions with `camagent session create`. \
        Publishers send over WHIP into a routed session; the router forwards their media, undecoded, \
        to each subscriber (WHEP).
        With --tls-cert and --tls-key, or --tls-self-signed, everything is served over HTTPS (browsers \
        give the session page the camera and microphone only on a secure origin). The self-signed \
        certificate is made on the first start beside the secret file (router-tls.crt, router-tls.key \
        mode 0600) and its SHA-256 fingerprint is printed, to compare with what a browser shows.
        Exit codes: 78 the secret file, or the TLS certificate or key, cannot be read, used or created; \
        84 the router cannot listen (address in use, no such address).
        """)

    @Option(help: "Address and port to listen on (HOST:PORT; [::]:PORT for IPv6).")
    var listen = "127.0.0.1:8090"

    @Option(help: "The secret file (created with a new random key when missing).")
    var secretFile = "./camagent-router.secret"

    @Option(help: "Most sessions the router holds.")
    var maxSessions = RegistryLimits().maxSessions

    @Option(help: "Most connections per session.")
    var maxConnections = RegistryLimits().maxConnectionsPerSession

    @Option(help: "Most streams per session.")
    var maxStreams = RegistryLimits().maxStreamsPerSession

    @Option(help: "Most subscribers per stream.")
    var maxSubscribers = RegistryLimits().maxSubscribersPerStream

    @Option(help: "Seconds a session may stay without any connection before it is removed (0: never), so sessions made and left do not fill --max-sessions.")
    var sessionIdleTimeout = 86_400

    @Option(help: "Seconds a client whose signalling broke may come back to its connection, streams and all (0: it ends at once, networkDisconnected).")
    var rejoinGrace = 10.0

    @Option(help: "Seconds without ICE consent from a publisher before its stream ends (networkDisconnected).")
    var publisherTimeout = 15.0

    @Option(help: "Seconds without ICE consent from a subscriber before it is dropped.")
    var subscriberTimeout = 30.0

    @Flag(help: "Offer loopback addresses as ICE candidates (peers on the same host).")
    var loopbackCandidates = false

    @Option(help: "Serve HTTPS with this certificate chain (PEM, leaf first); needs --tls-key.")
    var tlsCert: String?

    @Option(help: "The private key (PEM) of --tls-cert.")
    var tlsKey: String?

    @Flag(help: "Serve HTTPS with the router's own self-signed certificate, made on the first start beside the secret file.")
    var tlsSelfSigned = false

    @OptionGroup var global: GlobalOptions
    @OptionGroup var configFile: ConfigFileOption

    func validate() throws {
        guard parseListenAddress(listen) != nil else {
            throw ValidationError("--listen takes HOST:PORT, e.g. 127.0.0.1:8090 or [::]:8090")
        }
        for (name, value) in [("--max-sessions", maxSessions), ("--max-connections", maxConnections),
                              ("--max-streams", maxStreams), ("--max-subscribers", maxSubscribers)] {
            guard (1...100_000).contains(value) else { throw ValidationError("\(name) takes 1 to 100000") }
        }
        guard sessionIdleTimeout == 0 || (60...30 * 86_400).contains(sessionIdleTimeout) else {
            throw ValidationError("--session-idle-timeout takes 0 (never) or 60 to 2592000 seconds")
        }
        for (name, value) in [("--publisher-timeout", publisherTimeout), ("--subscriber-timeout", subscriberTimeout)] {
            guard (2...600).contains(value) else { throw ValidationError("\(name) takes 2 to 600 seconds") }
        }
        guard rejoinGrace == 0 || (1...600).contains(rejoinGrace) else {
            throw ValidationError("--rejoin-grace takes 0 (none) or 1 to 600 seconds")
        }
        guard (tlsCert == nil) == (tlsKey == nil) else {
            throw ValidationError("--tls-cert and --tls-key go together")
        }
        guard !(tlsSelfSigned && tlsCert != nil) else {
            throw ValidationError("--tls-self-signed or --tls-cert with --tls-key, not both")
        }
    }

    /// The TLS identity asked for, with a line saying what it is; nil for plain HTTP.
    func loadTLS(host: String) throws(RouterTLSError) -> (RouterTLSIdentity, String)? {
        if let tlsCert, let tlsKey {
            let identity = try RouterTLSIdentity.load(certificateFile: tlsCert, keyFile: tlsKey)
            return (identity, "tls: \(tlsCert), SHA-256 fingerprint \(identity.fingerprint)")
        }
        guard tlsSelfSigned else { return nil }
        let directory = secretFile.contains("/") ? String(secretFile[..<secretFile.lastIndex(of: "/")!]) : "."
        // The names it is reached by today: the listen address when it is one, this host's name and addresses.
        var names = HostInterfaces.addresses().map(\.ip)
        if let name = ProcessInfo.processInfo.hostName as String?, !name.isEmpty { names.insert(name, at: 0) }
        if !["0.0.0.0", "::", ""].contains(host) { names.insert(host, at: 0) }
        let made = try RouterTLSIdentity.selfSigned(in: directory.isEmpty ? "/" : directory, hostNames: names)
        return (made.identity, "tls: self-signed, \(made.created ? "created " : "")\(made.certificateFile), "
            + "SHA-256 fingerprint \(made.identity.fingerprint), public key pin \(made.identity.publicKeyPin)")
    }

    func run() throws {
        let logger = global.makeLogger(label: "camagent.router")
        let (host, port) = parseListenAddress(listen)!
        let secret: RouterSecret
        do { secret = try RouterSecret.load(orCreateAt: secretFile) } catch {
            printError("camagent: \(error)")
            throw ExitCode(ExitCodes.secretFileError)
        }
        printLine(secret.wasCreated ? "secret: created \(secretFile)" : "secret: \(secretFile)")
        warnIfShort(secret)
        let tls: RouterTLSIdentity?
        do {
            let loaded = try loadTLS(host: host)
            tls = loaded?.0
            if let line = loaded?.1 { printLine(line) }
        } catch {
            printError("camagent: \(error)")
            throw ExitCode(ExitCodes.secretFileError)
        }

        let limits = RegistryLimits(maxSessions: maxSessions, maxConnectionsPerSession: maxConnections,
                                    maxStreamsPerSession: maxStreams, maxSubscribersPerStream: maxSubscribers,
                                    sessionIdleTimeout: sessionIdleTimeout == 0 ? nil : .seconds(sessionIdleTimeout),
                                    rejoinGrace: rejoinGrace == 0 ? nil : .milliseconds(Int64(rejoinGrace * 1000)))
        var media = RouterMediaSettings()
        media.maxSubscribersPerStream = maxSubscribers
        media.publisherConsentTimeout = publisherTimeout
        media.subscriberConsentTimeout = subscriberTimeout
        media.includeLoopbackCandidates = loopbackCandidates
        let streams: StreamRouter
        do { streams = try StreamRouter(settings: media, logger: logger) } catch {
            printError("camagent: the router's media side cannot start: \(error)")
            throw ExitCode(ExitCodes.driverError)
        }
        let captions = RouterCaptions(router: streams, logger: logger)
        printLine("captions: \(captions.unavailable.map { "unavailable: \($0)" } ?? "ready (whisper.cpp, tiny.en)")")
        defer {
            captions.stopAll()
            streams.stopAll()
        }
        let server = SessionServer(
            configuration: SessionServerConfiguration(host: host, port: port, limits: limits, transportSecurity: tls),
            secret: secret, mediaEngine: RouterMediaEngine(router: streams, captions: captions), logger: logger)

        // The server runs in a ServiceGroup, which SIGINT and SIGTERM shut down
        // gracefully (even one that comes before it runs); this thread waits for
        // it to start, then to end.
        let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
        let stopRequested = PThreadLocked(false)
        TerminationSignals.onSignal {
            stopRequested.withLock { $0 = true }
            Task { await group.triggerGracefulShutdown() }
        }
        let running: BackgroundServer
        do {
            running = try BackgroundServer(run: { try await group.run() }, boundPort: { server.boundPort })
        } catch {
            // A signal as it started: the server may have ended before it was seen listening.
            if stopRequested.withLock({ $0 }) { return }
            printError("camagent: the router cannot listen on \(listen): \(error)")
            throw ExitCode(ExitCodes.listenFailed)
        }
        var shownHost = host
        if shownHost.contains(":") { shownHost = "[\(shownHost)]" }
        printLine("router: listening on \(tls == nil ? "http" : "https")://\(shownHost):\(server.boundPort ?? port)")
        running.waitForEnd()  // until SIGINT/SIGTERM, or the server failing
        if let failure = running.failure {
            printError("camagent: the router stopped: \(failure)")
            throw ExitCode(ExitCodes.driverError)
        }
    }
}


/// SwiftNIO's socket errors read "bind(descriptor:ptr:bytes:): ... (errno: 98)";
/// the errno's own words say it better.
func explainSocketError(_ error: any Error) -> String {
    let text = "\(error)"
    guard let range = text.range(of: "(errno: "), let end = text[range.upperBound...].firstIndex(of: ")"),
          let code = Int32(text[range.upperBound..<end]) else { return text }
    return String(cString: strerror(code))
}

extension ExitCodes {
    /// The router's secret file is missing (token, session), unreadable, or cannot be created (router);
    /// or the router's TLS certificate or key cannot be read, used or created.
    static let secretFileError: Int32 = 78
}

/// The secret file `token` and `session create` read (they never create
/// one): on failure, the error on stderr and exit 78.
func readRouterSecret(at path: String) throws -> RouterSecret {
    let secret: RouterSecret
    do { secret = try RouterSecret.load(from: path) } catch {
        printError("camagent: \(error)")
        throw ExitCode(ExitCodes.secretFileError)
    }
    warnIfShort(secret)
    return secret
}

/// A secret shorter than HS256's 32 bytes works (the file's bytes are the key, as the contract
/// says), but is said on stderr each time it is used.
func warnIfShort(_ secret: RouterSecret) {
    guard secret.isShorterThanRecommended else { return }
    printError("camagent: warning: the secret in \(secret.path) is \(secret.key.count) bytes long; HS256 wants at least "
               + "\(RouterSecret.recommendedKeyLength) (RFC 7518 §3.2): a short key can be guessed, and whoever guesses it can mint tokens")
}
