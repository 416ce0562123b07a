import RTP
import Testing

@Suite("One-byte header extensions (RFC 8285)")
struct OneByteExtensionTests {
    @Test func writtenInlineAndFoundAgain() throws {
        var header = RTPHeader(payloadType: 96, sequenceNumber: 7, timestamp: 9, ssrc: 5, marker: true)
        header.oneByteExtension = OneByteExtension(id: 3, value: 0x01)
        var out: [UInt8] = []
        header.write(to: &out)
        #expect(out.count == header.size && header.size == 20)
        #expect(out[0] & 0x10 != 0)   // X bit
        #expect(Array(out[12...]) == [0xBE, 0xDE, 0x00, 0x01, 0x30, 0x01, 0x00, 0x00])
        out += [1, 2, 3]
        let parsed = try RTPPacket(parsing: out[...])
        #expect(Array(parsed.payload) == [1, 2, 3])
        #expect(OneByteExtension.find(3, in: parsed.header) == 1)
        #expect(OneByteExtension.find(4, in: parsed.header) == nil)
    }

    @Test func findSkipsOtherElementsAndPadding() {
        var header = RTPHeader(payloadType: 96, sequenceNumber: 0, timestamp: 0, ssrc: 0)
        header.extensionProfile = 0xBEDE
        // id 1 with 3 bytes, a padding byte, id 13 with 1 byte, then padding.
        header.extensionData = [0x12, 0xAA, 0xBB, 0xCC, 0x00, 0xD0, 0x02, 0x00]
        #expect(OneByteExtension.find(13, in: header) == 0x02)
        #expect(OneByteExtension.find(1, in: header) == 0xAA)
        header.extensionProfile = 0x1000   // two-byte form: not ours to read
        #expect(OneByteExtension.find(13, in: header) == nil)
    }
}
