import Testing
@testable import Session
@testable import WHIP

@Suite("Session client: WebSocket frames and the router's messages")
struct SessionClientTests {
    @Test("the handshake's accept value is RFC 6455's worked example")
    func acceptValue() {
        #expect(WebSocketConnection.acceptValue(for: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test("client frames are masked, with 7-, 16- and 64-bit lengths", arguments: [5, 300, 70_000])
    func masked(length: Int) {
        let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0) }
        let frame = WebSocketConnection.frame(opcode: 0x1, payload: payload)
        #expect(frame[0] == 0x81)
        #expect(frame[1] & 0x80 != 0, "a client masks every frame")
        var offset = 2
        var decodedLength = Int(frame[1] & 0x7F)
        if decodedLength == 126 {
            decodedLength = Int(frame[2]) << 8 | Int(frame[3])
            offset = 4
        } else if decodedLength == 127 {
            decodedLength = frame[2..<10].reduce(0) { $0 << 8 | Int($1) }
            offset = 10
        }
        #expect(decodedLength == length)
        let mask = Array(frame[offset..<offset + 4])
        let unmasked = frame[(offset + 4)...].enumerated().map { $0.element ^ mask[$0.offset & 3] }
        #expect(unmasked == payload)
    }

    @Test("the contract's messages become events; unknown ones are left out")
    func parse() {
        let connected = Session.parse(#"{"type":"connected","connectionId":"c1","capabilities":{"publish":false,"subscribe":true,"forceDisconnect":false,"captions":false},"mediaMode":"routed","connections":[],"streams":[{"streamId":"s1","connectionId":"c2","name":"kiosk","hasAudio":true,"hasVideo":true,"hasCaptions":false,"videoType":"camera","width":640,"height":480,"createdAt":1}]}"#)
        guard case .connected(let id, let capabilities, let streams)? = connected else {
            Issue.record("not connected: \(String(describing: connected))")
            return
        }
        #expect(id == "c1" && capabilities.subscribe && !capabilities.publish)
        #expect(streams.map(\.name) == ["kiosk"] && streams[0].width == 640)
        #expect(Session.parse(#"{"type":"streamDestroyed","streamId":"s1","reason":"forceDisconnected"}"#)
                == .streamDestroyed(streamId: "s1", reason: "forceDisconnected"))
        #expect(Session.parse(#"{"type":"streamPropertyChanged","streamId":"s1","property":"hasVideo","oldValue":true,"newValue":false}"#)
                == .streamPropertyChanged(streamId: "s1", property: "hasVideo", oldValue: "true", newValue: "false"))
        #expect(Session.parse(#"{"type":"streamPropertyChanged","streamId":"s1","property":"videoDimensions","oldValue":{"width":0,"height":0},"newValue":{"width":640,"height":480}}"#)
                == .streamPropertyChanged(streamId: "s1", property: "videoDimensions", oldValue: #"{"height":0,"width":0}"#,
                                          newValue: #"{"height":480,"width":640}"#))
        #expect(Session.parse(#"{"type":"caption","streamId":"s1","text":"hello","isFinal":true}"#)
                == .caption(streamId: "s1", text: "hello", isFinal: true))
        #expect(Session.parse(#"{"type":"signal","signalType":"chat","data":"hi","from":"c2"}"#)
                == .signal(type: "chat", data: "hi", from: "c2"))
        // Relayed sessions: an offer to answer, and a subscriber that left.
        #expect(Session.parse(#"{"type":"subscribeOffer","subscriberId":"u1","streamId":"s1","sdp":"v=0\r\n"}"#)
                == .subscribeOffer(subscriberId: "u1", streamId: "s1", sdp: "v=0\r\n"))
        #expect(Session.parse(#"{"type":"unsubscribe","subscriberId":"u1","streamId":"s1"}"#)
                == .unsubscribe(subscriberId: "u1", streamId: "s1"))
        #expect(Session.parse(#"{"type":"subscribeOffer","subscriberId":"u1"}"#) == nil)
        #expect(Session.parse(#"{"type":"pong"}"#) == nil)
        #expect(Session.parse("not json") == nil)
    }
}
