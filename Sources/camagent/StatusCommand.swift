import ArgumentParser
import Foundation
import Networking
import SessionServer
import ViewerServer
import WHIP

/// `camagent status`: what a running `publish` is doing, read from its
/// viewer server's /stats: state, viewers, rates, and the viewer URL with the
/// token from its token file (which the service keeps out of the journal).
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show a running publisher's state, viewers, rates and viewer URL (from its /stats).",
        discussion: """
        Exit codes: 78 the token file is unreadable or too short, 80 nothing answers at --url, \
        81 the token was refused (401/403), 82 an answer that is not the publisher's /stats.
        """)

    @Option(help: "The publisher's viewer server (its --listen address).")
    var url = "http://127.0.0.1:8080"

    @Option(help: "File with the viewers' token, as given to publish --viewer-token-file (read when it exists).")
    var viewerTokenFile = "/var/lib/camagent/viewer-token"

    @Option(help: "The viewers' token itself, instead of the file.")
    var viewerToken: String?

    @Option(help: "Seconds to wait for the answer.")
    var timeout = 5.0

    @Flag(help: "Print /stats as it came (one JSON object).")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard timeout > 0, timeout <= 600 else { throw ValidationError("--timeout takes more than 0 and at most 600 seconds") }
        guard URLComponents(string: url)?.host != nil else { throw ValidationError("--url takes http://HOST:PORT") }
    }

    /// What status reads from /stats (a subset of PublisherStats).
    struct Snapshot: Decodable {
        var state: String
        var frameRate: Double
        var framesEncoded: UInt64
        var videoDeviceLost: Bool
        var video: Stream?
        var audio: Stream?
        var viewers: [Viewer]
        struct Stream: Decodable { var bitrate: Double }
        struct Viewer: Decodable { var state: String; var video: Stream?; var audio: Stream? }
    }

    func run() throws {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        // The token: given, else the file when there is one (a publisher with --open needs none).
        var token = viewerToken
        if token == nil, FileManager.default.fileExists(atPath: viewerTokenFile) {
            token = try readViewerToken(viewerTokenFile)
        }
        // Camera 1's stats are /stats; with several cameras, camera N's are /cameras/N/stats, up to the first 404.
        var cameras: [(body: [UInt8], snapshot: Snapshot)] = []
        while let camera = try stats(base: base, path: ViewerRoutes.cameraPath(cameras.count + 1) + "stats", token: token,
                                     optional: !cameras.isEmpty) {
            cameras.append(camera)
        }
        if json {
            for camera in cameras { print(String(decoding: camera.body, as: UTF8.self)) }
            return
        }
        for (index, camera) in cameras.enumerated() {
            let snapshot = camera.snapshot
            if cameras.count > 1 { print((index == 0 ? "" : "\n") + "camera \(index + 1):") }
            let watching = snapshot.viewers.filter { $0.state == "connected" }
            let bitrate = snapshot.video?.bitrate ?? watching.compactMap { $0.video?.bitrate }.max()
            print("state:     \(snapshot.state)" + (snapshot.videoDeviceLost ? " (camera lost, waiting for it)" : ""))
            print("viewers:   \(watching.count) connected" + (snapshot.viewers.count > watching.count ? ", \(snapshot.viewers.count - watching.count) connecting or leaving" : ""))
            print("video:     \(snapshot.frameRate.formatted(decimals: 1)) fps, \(snapshot.framesEncoded) frames encoded"
                  + (bitrate.map { ", \(Int($0 / 1000)) kbps" } ?? ""))
            print("viewer:    \(viewerURL(base: base, token: token, camera: index + 1))")
        }
    }

    /// One camera's /stats, or exits saying what went wrong; nil for a 404 when `optional` (no such camera).
    private func stats(base: String, path: String, token: String?, optional: Bool) throws -> (body: [UInt8], snapshot: Snapshot)? {
        let response: PlainHTTPResponse
        do {
            response = try plainHTTPRequest(method: "GET", url: base + path,
                                            headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [],
                                            timeout: timeout)
        } catch {
            printFailure("nothing answers at \(base): is camagent publish running there? (\(error))")
            throw ExitCode(ExitCodes.serverUnreachable)
        }
        switch response.status {
        case 200: break
        case 404 where optional: return nil
        case 401, 403:
            let hint = token == nil ? "no token was sent: \(viewerTokenFile) is missing or not readable by this user (try as root or camagent)"
                                    : "the token is not this publisher's"
            printFailure("\(base)\(path) refused the request (HTTP \(response.status)): \(hint)")
            throw ExitCode(ExitCodes.unauthorized)
        default:
            printFailure("\(base)\(path) answered HTTP \(response.status)")
            throw ExitCode(ExitCodes.serverRefused)
        }
        guard let snapshot = try? JSONDecoder().decode(Snapshot.self, from: Data(response.body)) else {
            printFailure("\(base)\(path) is not a camagent publisher's statistics")
            throw ExitCode(ExitCodes.serverRefused)
        }
        return (response.body, snapshot)
    }

    /// The page's URL as a browser on the LAN would open it: a loopback host
    /// is replaced by this machine's first LAN address.
    func viewerURL(base: String, token: String?, camera: Int = 1) -> String {
        var components = URLComponents(string: base) ?? URLComponents()
        if let host = components.host, host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "0.0.0.0",
           let lan = HostInterfaces.addresses(includeLoopback: false).first(where: { $0.ip.contains(".") }) {
            components.host = lan.ip
        }
        components.path = ViewerRoutes.cameraPath(camera)
        if let token { components.queryItems = [URLQueryItem(name: "token", value: token)] }
        // URLQueryItem leaves '+' alone, which a server reads as a space.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return components.string ?? base + "/"
    }
}

/// The viewers' token from its file (trimmed, at least 32 bytes), or exit 78 saying why not.
func readViewerToken(_ path: String) throws -> String {
    do { return String(decoding: try RouterSecret.load(from: path, minimumLength: RouterSecret.recommendedKeyLength).key, as: UTF8.self) } catch {
        printFailure("viewer token: \(error)")
        throw ExitCode(ExitCodes.secretFileError)
    }
}

/// The viewers' token from its file, made (mode 0600, 64 random hex digits) when missing; else exit 78.
func loadViewerToken(_ path: String) throws -> String {
    do { return String(decoding: try RouterSecret.load(orCreateAt: path, minimumLength: RouterSecret.recommendedKeyLength).key, as: UTF8.self) } catch {
        printFailure("viewer token: \(error)")
        throw ExitCode(ExitCodes.secretFileError)
    }
}
