import ArgumentParser
import Foundation
import SessionServer
import WHIP

/// `camagent session`: REST calls to a running router.
struct SessionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "session",
        abstract: "Talk to a running router's REST API.",
        subcommands: [SessionCreateCommand.self]
    )
}

/// `camagent session create`: makes a session on a router with a project
/// token minted from the secret file, and prints the sessionId alone on stdout.
struct SessionCreateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a session on a router and print its sessionId.",
        discussion: """
        Exit codes: 78 the secret file is missing or unreadable, 80 the router is unreachable \
        (refused, no route, timeout), 81 it said 401/403 (the secret is not the router's), 82 it \
        refused otherwise (a limit: 503, 4xx, unusable answer).
        """)

    @Option(help: "The router's base URL, e.g. http://127.0.0.1:8090.")
    var router: String

    @Option(help: "The router's secret file (never created here).")
    var secretFile = "./camagent-router.secret"

    @Flag(help: "A relayed session (media between the clients; the router only signals).")
    var relayed = false

    @Option(help: "Seconds for the whole request, connect to answer.")
    var timeout: Double = 10

    @Option(help: "A PEM file of certificates to trust besides the system's: the router's self-signed certificate (router-tls.crt), or a private CA.")
    var tlsCA: String?

    func validate() throws {
        guard router.hasPrefix("http://") || router.hasPrefix("https://") else {
            throw ValidationError("--router takes an http:// or https:// URL, e.g. http://127.0.0.1:8090")
        }
        guard timeout > 0, timeout <= 600 else { throw ValidationError("--timeout takes more than 0 and at most 600 seconds") }
    }

    func run() throws {
        try checkTrustedCertificatesFile(tlsCA)
        let secret = try readRouterSecret(at: secretFile)
        let authority = TokenAuthority(secret: secret)
        let minted: Result<String, TokenError>
        do {
            minted = try blockingAwait(timeout: 30) {
                do throws(TokenError) { return .success(try await authority.makeProjectToken(expireIn: 300)) } catch {
                    return .failure(error)
                }
            }
        } catch {
            printError("camagent: minting the project token \(error)")
            throw ExitCode(ExitCodes.driverError)
        }
        guard case .success(let token) = minted else {
            if case .failure(let error) = minted { printError("camagent: \(error)") }
            throw ExitCode(ExitCodes.driverError)
        }

        var base = router
        while base.hasSuffix("/") { base.removeLast() }
        let url = base + "/v2/sessions"
        let body = Array(#"{"mediaMode":"\#(relayed ? "relayed" : "routed")"}"#.utf8)
        let response: PlainHTTPResponse
        do {
            response = try plainHTTPRequest(
                method: "POST", url: url,
                headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json"), ("Accept", "application/json")],
                body: body, timeout: timeout, trustedCertificatesFile: tlsCA)
        } catch {
            printError("camagent: \(Self.describe(error, url: url))")
            switch error {
            case .badURL: throw ExitCode(ExitCodes.usage)
            case .badResponse: throw ExitCode(ExitCodes.serverRefused)
            default: throw ExitCode(ExitCodes.serverUnreachable)
            }
        }
        let message = Self.errorMessage(response.body)
        switch response.status {
        case 200, 201:
            struct Created: Decodable { var sessionId: String }
            guard let created = try? JSONDecoder().decode(Created.self, from: Data(response.body)) else {
                printError("camagent: POST \(url) answered \(response.status) without a sessionId")
                throw ExitCode(ExitCodes.serverRefused)
            }
            printLine(created.sessionId)
        case 401, 403:
            printError("camagent: the router refused the project token (HTTP \(response.status)): \(message) — is \(secretFile) that router's secret?")
            throw ExitCode(ExitCodes.unauthorized)
        default:
            printError("camagent: the router refused to create a session (HTTP \(response.status)): \(message)")
            throw ExitCode(ExitCodes.serverRefused)
        }
    }

    /// The `message` of a JSON error body, else the body's start.
    static func errorMessage(_ body: [UInt8]) -> String {
        struct ErrorBody: Decodable { var message: String }
        if let parsed = try? JSONDecoder().decode(ErrorBody.self, from: Data(body)) { return parsed.message }
        let text = String(decoding: body.prefix(200), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "(no message)" : text
    }

    /// The WHIP client's network errors, worded for the router.
    static func describe(_ error: WHIPError, url: String) -> String {
        switch error {
        case .badURL(let why): "bad --router URL: \(why)"
        case .unreachable(let host, let reason): "the router at \(host) is unreachable: \(reason)"
        case .refused(let host, let port): "connection refused by \(host) port \(port): is the router running?"
        case .timedOut(let host, let during): "timed out talking to the router at \(host) during \(during)"
        case .tls(let host, let reason): "TLS with \(host) failed: \(reason)"
        case .badResponse(let why): "the router's answer to POST \(url) is not HTTP: \(why)"
        default: "\(error)"
        }
    }
}
