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
}
