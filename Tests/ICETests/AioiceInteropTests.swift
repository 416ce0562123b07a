#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ICE
import TestSupport
import Testing

/// The python3 that has the test peers: $CAMAGENT_PYTHON (scripts/test sets it), else the
/// virtual environment `scripts/install --test` makes, else python3 on PATH.
let testPython: String = {
    if let path = ProcessInfo.processInfo.environment["CAMAGENT_PYTHON"], !path.isEmpty { return path }
    let venv = "/opt/camagent-venv/bin/python3"
    return FileManager.default.isExecutableFile(atPath: venv) ? venv : "python3"
}()

/// A Process that runs `testPython` with these arguments.
func testPythonProcess(_ arguments: [String]) -> Process {
    let process = Process()
    if testPython.contains("/") {
        process.executableURL = URL(fileURLWithPath: testPython)
        process.arguments = arguments
    } else {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [testPython] + arguments
    }
    return process
}

/// Whether `testPython` can import aioice.
let aioiceAvailable: Bool = {
    let process = testPythonProcess(["-c", "import aioice"])
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}()

/// aioice (PyPI `aioice`, the ICE of aiortc) as the peer, on 127.0.0.1: an independent
/// implementation checks our requests, answers and nomination. Skipped (and listed as
/// skipped) where the test python cannot import aioice, except in a strict run
/// (scripts/test, CI), where it runs and fails saying so.
@Suite("ICE against aioice", .timeLimit(.minutes(1)),
       .enabled(if: aioiceAvailable || strictTestEnvironment,
                "the test python cannot import aioice (scripts/install --test installs it in /opt/camagent-venv)"))
struct AioiceInteropTests {
    /// The peer: gathers on 127.0.0.1 only, prints its credentials and candidates as one JSON
    /// line, reads ours, connects, echoes the first datagram back with "echo:" in front.
    static let script = """
        import asyncio, json, sys
        import aioice.ice
        aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"]
        from aioice import Candidate, Connection

        async def main():
            conn = Connection(ice_controlling=sys.argv[1] == "controlling", components=1, use_ipv6=False)
            await conn.gather_candidates()
            print(json.dumps({"ufrag": conn.local_username, "pwd": conn.local_password,
                              "candidates": [c.to_sdp() for c in conn.local_candidates]}), flush=True)
            remote = json.loads(await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline))
            conn.remote_username = remote["ufrag"]
            conn.remote_password = remote["pwd"]
            for c in remote["candidates"]:
                await conn.add_remote_candidate(Candidate.from_sdp(c))
            await conn.add_remote_candidate(None)
            await asyncio.wait_for(conn.connect(), 20)
            data, _ = await asyncio.wait_for(conn.recvfrom(), 20)
            await conn.send(b"echo:" + data)
            await asyncio.sleep(0.5)
            await conn.close()

        asyncio.run(main())
        """

    /// Reads one line from `fd` within `timeout` seconds.
    static func readLine(_ fd: Int32, timeout: Double) -> String? {
        var line: [UInt8] = []
        let end = monotonicNow() + timeout
        while monotonicNow() < end {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0 else { continue }
            var byte: UInt8 = 0
            guard read(fd, &byte, 1) == 1 else { return nil }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
        return nil
    }

    @Test(arguments: [ICEAgent.Role.controlling, .controlled])
    func connectsAndCarriesData(ourRole: ICEAgent.Role) throws {
        try #require(aioiceAvailable, "\(testPython) cannot import aioice: run scripts/install --test")
        let process = testPythonProcess(["-c", Self.script, ourRole == .controlling ? "controlled" : "controlling"])
        let toPeer = Pipe(), fromPeer = Pipe()
        process.standardInput = toPeer
        process.standardOutput = fromPeer
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        let peer = try LoopbackPeer(role: ourRole, label: "ice.aioice")
        let line = try #require(Self.readLine(fromPeer.fileHandleForReading.fileDescriptor, timeout: 20))
        struct Offer: Codable { var ufrag: String; var pwd: String; var candidates: [String] }
        let theirs = try JSONDecoder().decode(Offer.self, from: Data(line.utf8))
        peer.agent.setRemoteCredentials(ufrag: theirs.ufrag, password: theirs.pwd, isLite: false)
        for sdp in theirs.candidates {
            let f = sdp.split(separator: " ").map(String.init)   // foundation component transport priority ip port typ type
            guard f.count >= 8, f[2].lowercased() == "udp", let priority = UInt32(f[3]), let port = UInt16(f[5]) else { continue }
            peer.agent.addRemoteCandidate(ip: f[4], port: port, priority: priority, type: f[7], foundation: f[0])
        }
        let ours = Offer(ufrag: peer.agent.localUfrag, pwd: peer.agent.localPassword,
                         candidates: peer.agent.localCandidates.map { "\($0.foundation) 1 udp \($0.priority) \($0.ip) \($0.port) typ \($0.type)" })
        try toPeer.fileHandleForWriting.write(contentsOf: JSONEncoder().encode(ours) + Data("\n".utf8))

        peer.agent.start(now: monotonicNow())
        let connected = try runLoop([peer], timeout: 20) { peer.agent.state == .connected }
        #expect(connected, "state \(peer.agent.state)")
        guard connected else { return }
        #expect(peer.agent.selected?.remote.port == theirs.candidates.first.flatMap { UInt16($0.split(separator: " ")[5]) })

        // aioice's connect() returns once it has its own nominated pair; data sent before that is dropped.
        let payload: [UInt8] = [0x80, 0x60, 0x12, 0x34] + Array("hello aioice".utf8)
        let echoed = try runLoop([peer], timeout: 20) {
            if peer.application.isEmpty { try? peer.sendApplication(payload) }   // until the echo comes back
            return !peer.application.isEmpty
        }
        #expect(echoed)
        #expect(peer.application.first == Array("echo:".utf8) + payload)
        #expect(peer.agent.roundTripTime != nil)
    }
}
