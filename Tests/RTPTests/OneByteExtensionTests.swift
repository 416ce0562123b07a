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

    /// A browser names each simulcast layer's stream in its packets
    /// (urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id): a string, read in place.
    @Test func aPacketViewReadsAnElementsBytesInEitherForm() throws {
        var header = RTPHeader(payloadType: 96, sequenceNumber: 1, timestamp: 2, ssrc: 3)
        header.extensionProfile = 0xBEDE
        // id 4 (mid) "0", padding, id 10 (rid) "hi", padding to the word.
        header.extensionData = [0x40, 0x30, 0x00, 0xA1, 0x68, 0x69, 0x00, 0x00]
        var packet: [UInt8] = []
        header.write(to: &packet)
        packet += [9, 9]
        let view = try RTPPacketView(parsing: packet[...])
        #expect(view.headerExtension(10, in: packet[...]).map { Array($0) } == Array("hi".utf8))
        #expect(view.headerExtension(4, in: packet[...]).map { Array($0) } == [0x30])
        #expect(view.headerExtension(5, in: packet[...]) == nil)
        #expect(Array(packet[view.payload]) == [9, 9])

        header.extensionProfile = 0x1000   // two-byte form: id, length, value
        header.extensionData = [0x00, 0x0A, 0x03, 0x72, 0x69, 0x64, 0x00, 0x00]
        packet = []
        header.write(to: &packet)
        let twoByte = try RTPPacketView(parsing: packet[...])
        #expect(twoByte.headerExtension(10, in: packet[...]).map { Array($0) } == Array("rid".utf8))

        // No extension block, or an element running past the block: nothing.
        packet = []
        RTPHeader(payloadType: 96, sequenceNumber: 1, timestamp: 2, ssrc: 3).write(to: &packet)
        #expect(try RTPPacketView(parsing: packet[...]).headerExtension(10, in: packet[...]) == nil)
        header.extensionProfile = 0xBEDE
        header.extensionData = [0xA7, 0x68, 0x69, 0x00]   // says 8 bytes, has 3
        packet = []
        header.write(to: &packet)
        #expect(try RTPPacketView(parsing: packet[...]).headerExtension(10, in: packet[...]) == nil)
    }
}
