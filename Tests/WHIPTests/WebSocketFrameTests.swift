import Testing
@testable import WHIP

/// What `WebSocketConnection` makes of the frames a server sends: a frame it
/// must refuse is an error, never a trap.
@Suite("WebSocket frames from the server")
struct WebSocketFrameTests {
    func receive(_ frames: [UInt8]) throws -> WebSocketConnection.Message? {
        let s = try server(.webSocket(frames: frames))
        defer { s.stop() }
        let connection = try WebSocketConnection.connect(url: "ws://127.0.0.1:\(s.port)/v2/session/x/connect", timeout: 5)
        return try connection.receive(timeout: 5)
    }

    @Test("a text frame with a 64-bit length is read")
    func sixtyFourBitLength() throws {
        let payload = Array(repeating: UInt8(ascii: "a"), count: 70_000)
        let header: [UInt8] = [0x81, 0x7F] + withUnsafeBytes(of: UInt64(payload.count).bigEndian, Array.init)
        #expect(try receive(header + payload) == .text(String(repeating: "a", count: 70_000)))
    }

    @Test("a 64-bit length with its top bit set is refused, not read as a negative length",
          arguments: [[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], [0x80, 0, 0, 0, 0, 0, 0, 5]] as [[UInt8]])
    func topBitSet(length: [UInt8]) {
        #expect(throws: WHIPError.badResponse("a WebSocket message larger than \(WebSocketConnection.maxMessageBytes) bytes")) {
            try receive([0x81, 0x7F] + length + [0x61, 0x62])
        }
    }

    /// A server that never stops sending control frames (pongs, as fast as they are read)
    /// kept receive reading past its deadline: the deadline was looked at only after a read
    /// that timed out. It returned once the server stopped (here after 3 s, with `.closed`);
    /// a server that never stops held `Session.connect` and the signalling loop for good.
    @Test("receive keeps its deadline while the server keeps sending control frames")
    func deadlineHoldsUnderAStreamOfPongs() throws {
        let pongs = Array([[UInt8]](repeating: [0x8A, 0x00], count: 512).joined())
        let s = try server(.webSocketStream(frame: pongs, seconds: 3))
        defer { s.stop() }
        let connection = try WebSocketConnection.connect(url: "ws://127.0.0.1:\(s.port)/v2/session/x/connect", timeout: 5)
        #expect(try connection.receive(timeout: 0.3) == nil)
        connection.close()
    }
}
