import Foundation

/// Python's http.server (nobody here wrote it) as a WHIP endpoint: POST gets
/// 201 with a relative Location, an ETag and an SDP answer; DELETE gets 204.
/// Every request is appended as one JSON line to a file the test reads.
/// With a certificate it serves HTTPS through Python's ssl module.
final class PythonWHIPServer {
    static let script = #"""
import http.server, json, os, signal, ssl, sys, threading

# The test process may have these blocked; a spawned child inherits that.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

def exit_when_the_test_goes_away():
    sys.stdin.read()
    os._exit(0)

threading.Thread(target=exit_when_the_test_goes_away, daemon=True).start()
record_path = sys.argv[1]
ANSWER = b"v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\n"

class Handler(http.server.BaseHTTPRequestHandler):
    def record(self, body):
        entry = {"method": self.command, "path": self.path,
                 "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
        with open(record_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.record(self.rfile.read(length).decode())
        self.send_response(201)
        self.send_header("Content-Type", "application/sdp")
        self.send_header("Location", "session/7f3a")
        self.send_header("ETag", '"v1"')
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def do_DELETE(self):
        self.record("")
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
if len(sys.argv) > 3:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"""#

    let process = Process()
    /// Closing it (stop) ends the server even if SIGTERM cannot reach it.
    private let input = Pipe()
    private var stopped = false
    let port: Int
    let recordPath: String

    struct Recorded: Decodable {
        var method: String
        var path: String
        var headers: [String: String]
        var body: String
    }

    init(directory: URL, certificate: (cert: String, key: String)? = nil) throws {
        recordPath = directory.appendingPathComponent("requests.jsonl").path
        let scriptPath = directory.appendingPathComponent("whip_server.py").path
        try Self.script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", scriptPath, recordPath] + (certificate.map { [$0.cert, $0.key] } ?? [])
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let more = output.fileHandleForReading.availableData
            guard !more.isEmpty else { break }
            line += more
        }
        guard let text = String(data: line, encoding: .utf8),
              let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            try? input.fileHandleForWriting.close()
            process.terminate()
            throw TestSetupError("python3 http.server did not start (printed \(String(decoding: line, as: UTF8.self)))")
        }
        self.port = port
    }

    deinit { stop() }

    func stop() {
        guard !stopped else { return }
        stopped = true
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    var requests: [Recorded] {
        guard let text = try? String(contentsOfFile: recordPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(Recorded.self, from: Data($0.utf8)) }
    }
}

struct TestSetupError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A fresh directory under the temporary directory, removed by the caller.
func makeTemporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("whip-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A self-signed ECDSA P-256 certificate for "localhost" made by the openssl CLI.
func makeLocalhostCertificate(in directory: URL) throws -> (cert: String, key: String) {
    let cert = directory.appendingPathComponent("cert.pem").path
    let key = directory.appendingPathComponent("key.pem").path
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [
        "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-days", "2",
        "-keyout", key, "-out", cert,
    ]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw TestSetupError("openssl req failed (\(process.terminationStatus))") }
    return (cert, key)
}
