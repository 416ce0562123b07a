import RTP
import Testing

/// Packs `frame` with `payloader` into full RTP packets, as a sender would.
func packets(_ frame: [UInt8], _ payloader: inout some RTPPayloader, maxPayloadSize: Int) -> [RTPPacket] {
    var out: [RTPPacket] = []
    var sequence: UInt16 = 65534   // wraps during the frame on purpose
    frame.withUnsafeBytes { bytes in
        payloader.packetize(bytes, maxPayloadSize: maxPayloadSize) { last, appendPayload in
            var buffer: [UInt8] = []
            RTPHeader(payloadType: 96, sequenceNumber: sequence, timestamp: 90_000, ssrc: 7, marker: last)
                .write(to: &buffer)
            appendPayload(&buffer)
            sequence &+= 1
            out.append(try! RTPPacket(parsing: buffer[...]))
        }
    }
    return out
}

@Suite("RTP packets (RFC 3550)")
struct RTPHeaderTests {
    @Test func fixedHeaderBytes() {
        var out: [UInt8] = []
        RTPHeader(payloadType: 96, sequenceNumber: 0x1234, timestamp: 0xdead_beef, ssrc: 0x0102_0304, marker: true)
            .write(to: &out)
        #expect(out == [0x80, 0xe0, 0x12, 0x34, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04])
    }

    @Test func roundTripWithCSRCsExtensionAndPadding() throws {
        var header = RTPHeader(payloadType: 111, sequenceNumber: 9, timestamp: 48_000, ssrc: 42)
        header.csrcs = [1, 2]
        header.extensionProfile = 0xbede
        header.extensionData = [0x10, 0xaa, 0, 0]
        header.paddingLength = 4
        var bytes: [UInt8] = []
        header.write(to: &bytes)
        #expect(bytes.count == header.size)
        bytes += [1, 2, 3] + [0, 0, 0, 4]
        let packet = try RTPPacket(parsing: bytes[...])
        #expect(packet.header == header)
        #expect(Array(packet.payload) == [1, 2, 3])
    }

    @Test func malformedPacketsAreRejected() {
        #expect(throws: RTPError.tooShort(needed: 12, got: 3)) { try RTPPacket(parsing: [0x80, 0, 0][...]) }
        #expect(throws: RTPError.badVersion(1)) { try RTPPacket(parsing: ([0x40] + [UInt8](repeating: 0, count: 11))[...]) }
        // P set, last byte claims 200 bytes of padding in a 13-byte packet.
        #expect(throws: RTPError.badPadding) { try RTPPacket(parsing: ([0xa0] + [UInt8](repeating: 0, count: 11) + [200])[...]) }
        // X set but no room for the extension header.
        #expect(throws: RTPError.self) { try RTPPacket(parsing: ([0x90] + [UInt8](repeating: 0, count: 11))[...]) }
    }

    @Test func sequenceNumbersCompareAcrossTheWrap() {
        #expect(isNewer(1, than: 65535))
        #expect(!isNewer(65535, than: 1))
        #expect(isNewer(200, than: 100) && !isNewer(100, than: 100))
    }
}

@Suite("VP8 payload (RFC 7741)")
struct VP8PayloadTests {
    let frame = (0..<3000).map { UInt8(truncatingIfNeeded: $0 * 7) }

    @Test func framesSplitWithDescriptorsAndMarker() throws {
        var payloader = VP8Payloader(firstPictureID: 0x1234)
        let sent = packets(frame, &payloader, maxPayloadSize: 1200)
        #expect(sent.count == 3)
        #expect(sent.map(\.header.marker) == [false, false, true])
        #expect(sent.allSatisfy { $0.payload.count <= 1200 })
        // X=1 S=1 PID=0; I=1; M=1 and the 15-bit PictureID.
        #expect(Array(sent[0].payload.prefix(4)) == [0x90, 0x80, 0x92, 0x34])
        #expect(Array(sent[1].payload.prefix(4)) == [0x80, 0x80, 0x92, 0x34])
        var rebuilt: [UInt8] = []
        for p in sent {
            let d = try VP8PayloadDescriptor(parsing: p.payload)
            #expect(d.pictureID == 0x1234 && d.partitionIndex == 0 && !d.nonReference)
            rebuilt += p.payload.dropFirst(d.headerSize)
        }
        #expect(rebuilt == frame)
    }

    @Test func pictureIDAdvancesPerFrameAndWraps() throws {
        var payloader = VP8Payloader(firstPictureID: 0x7fff)
        let a = packets([1, 2, 3], &payloader, maxPayloadSize: 1200)
        let b = packets([4, 5, 6], &payloader, maxPayloadSize: 1200)
        #expect(try VP8PayloadDescriptor(parsing: a[0].payload).pictureID == 0x7fff)
        #expect(try VP8PayloadDescriptor(parsing: b[0].payload).pictureID == 0)
        #expect(a.count == 1 && a[0].header.marker)
    }

    /// With temporal layers: TL0PICIDX counts base frames, each frame says its
    /// layer (TID), and an upper-layer frame is marked non-reference (N).
    @Test func layeredFramesCarryTheirLayer() throws {
        var payloader = VP8Payloader(firstPictureID: 10, firstTL0PictureIndex: 255)
        var seen: [VP8PayloadDescriptor] = []
        var rebuilt: [[UInt8]] = []
        for layer: UInt8 in [0, 1, 0, 1] {
            var parts: [UInt8] = []
            frame.withUnsafeBytes { bytes in
                payloader.packetize(bytes, temporalLayer: layer, maxPayloadSize: 1200) { _, appendPayload in
                    var payload: [UInt8] = []
                    appendPayload(&payload)
                    let d = try! VP8PayloadDescriptor(parsing: payload[...])
                    if d.startOfPartition { seen.append(d) }
                    parts += payload.dropFirst(d.headerSize)
                    #expect(payload.count <= 1200)
                }
            }
            rebuilt.append(parts)
        }
        #expect(seen.map(\.temporalLayer) == [0, 1, 0, 1])
        #expect(seen.map(\.tl0PictureIndex) == [0, 0, 1, 1], "wraps from 255; an upper frame names the base before it")
        #expect(seen.map(\.nonReference) == [false, true, false, true])
        #expect(seen.map(\.pictureID) == [10, 11, 12, 13])
        #expect(seen.allSatisfy { $0.headerSize == 6 })
        #expect(rebuilt.allSatisfy { $0 == frame })
    }

    @Test func descriptorsFromOtherSendersParse() throws {
        // 7-bit PictureID 0x21, with TL0PICIDX and TID present (L and T set).
        let d = try VP8PayloadDescriptor(parsing: [0x90, 0xe0, 0x21, 0x05, 0x40, 0xaa][...])
        #expect(d.startOfPartition && d.pictureID == 0x21 && d.headerSize == 5)
        #expect(d.tl0PictureIndex == 0x05 && d.temporalLayer == 1)
        // No extension at all: one byte.
        #expect(try VP8PayloadDescriptor(parsing: [0x10, 0xaa][...]).headerSize == 1)
        #expect(throws: DepacketizeError.truncated) { try VP8PayloadDescriptor(parsing: [0x90, 0x80, 0x80][...]) }
    }
}

@Suite("H.264 payload (RFC 6184)")
struct H264PayloadTests {
    // SPS (type 7), PPS (type 8), a large IDR slice (type 5), with both start-code lengths.
    let sps: [UInt8] = [0x67, 0x42, 0xe0, 0x1f, 0xda, 0x01, 0x40, 0x16, 0xe8, 0x06]
    let pps: [UInt8] = [0x68, 0xce, 0x06, 0xe2]
    var idr: [UInt8] { [0x65] + (1..<5000).map { UInt8(truncatingIfNeeded: $0 % 251 + 1) } }
    var accessUnit: [UInt8] { [0, 0, 0, 1] + sps + [0, 0, 1] + pps + [0, 0, 0, 1] + idr }

    func rebuild(_ sent: [RTPPacket]) throws -> [UInt8] {
        var out: [UInt8] = []
        for p in sent { try H264Depacketizer().append(p.payload, to: &out) }
        return out
    }

    @Test func parameterSetsAggregateAndLargeSlicesFragment() throws {
        var payloader = H264Payloader()
        let sent = packets(accessUnit, &payloader, maxPayloadSize: 1200)
        // STAP-A: F=0, NRI=max(3,3), type 24; then 16-bit sizes.
        #expect(sent[0].payload.first == 0x78)
        #expect(Array(sent[0].payload.dropFirst().prefix(2)) == [0, UInt8(sps.count)])
        // FU-A: indicator keeps the slice's NRI; header S on the first, E on the last.
        let fragments = sent.dropFirst()
        #expect(fragments.allSatisfy { $0.payload.first == 0x7c })
        #expect(fragments.first!.payload.dropFirst().first == 0x85)
        #expect(fragments.last!.payload.dropFirst().first == 0x45)
        #expect(fragments.dropFirst().dropLast().allSatisfy { $0.payload.dropFirst().first == 0x05 })
        #expect(sent.allSatisfy { $0.payload.count <= 1200 })
        #expect(sent.map(\.header.marker) == Array(repeating: false, count: sent.count - 1) + [true])
        #expect(try rebuild(sent) == [0, 0, 0, 1] + sps + [0, 0, 0, 1] + pps + [0, 0, 0, 1] + idr)
    }

    @Test func smallUnitsThatDoNotFitTogetherGoAlone() throws {
        var payloader = H264Payloader()
        let unit: [UInt8] = [0x41] + [UInt8](repeating: 9, count: 700)   // non-IDR slice
        let sent = packets([0, 0, 1] + unit + [0, 0, 1] + unit, &payloader, maxPayloadSize: 1200)
        #expect(sent.count == 2)
        #expect(sent.allSatisfy { Array($0.payload) == unit })
        #expect(sent.map(\.header.marker) == [false, true])
    }

    @Test func annexBSplitsOnBothStartCodes() {
        let stream: [UInt8] = [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 4]
        let units = stream.withUnsafeBytes { Array(AnnexBUnits($0)) }
        #expect(units == [4..<7, 10..<12, 16..<18])
    }

    @Test func unknownPayloadTypesAreRefused() {
        var out: [UInt8] = []
        #expect(throws: DepacketizeError.unsupportedNALType(25)) {
            try H264Depacketizer().append([0x19, 0, 1, 0x67][...], to: &out)
        }
    }

    /// Found by FuzzH264: a STAP-A whose second unit runs past the payload was
    /// refused only after its first unit (here an SPS) had been written out.
    @Test func aRefusedSTAPAWritesNothing() {
        let crash: [UInt8] = [0x18, 0x00, 0x06, 0x67, 0x42, 0xc0, 0x04, 0x13, 0x14, 0x15, 0x16, 0x22, 0x74, 0x45]
        var out: [UInt8] = [9]
        #expect(throws: DepacketizeError.truncated) { try H264Depacketizer().append(crash[...], to: &out) }
        #expect(out == [9])
        var whole: [UInt8] = []
        try? H264Depacketizer().append(crash[0..<9], to: &whole)
        #expect(whole == [0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x04, 0x13, 0x14])
    }
}

@Suite("Reading packets in place (RTPPacketView, KeyframeInspection)")
struct RTPPacketViewTests {
    @Test func theViewAgreesWithTheFullParseWithExtensionCSRCAndPadding() throws {
        var header = RTPHeader(payloadType: 96, sequenceNumber: 65535, timestamp: 0xdead_beef, ssrc: 42, marker: true)
        header.csrcs = [7, 8]
        header.oneByteExtension = OneByteExtension(id: 3, value: 1)
        header.paddingLength = 4
        var bytes: [UInt8] = []
        header.write(to: &bytes)
        let payloadStart = bytes.count
        bytes += [1, 2, 3, 4, 5]
        // Padding goes last: three zero bytes and the count.
        var padded = Array(bytes)
        padded[0] |= 0x20
        padded += [0, 0, 0, 4]
        let view = try RTPPacketView(parsing: padded[...])
        let full = try RTPPacket(parsing: padded[...])
        #expect(view.payloadType == 96 && view.marker && view.sequenceNumber == 65535)
        #expect(view.timestamp == 0xdead_beef && view.ssrc == 42)
        #expect(Array(padded[view.payload]) == [1, 2, 3, 4, 5])
        #expect(Array(full.payload) == Array(padded[view.payload]))
        #expect(view.payload.lowerBound == payloadStart)
    }

    @Test func truncatedPacketsAreErrors() {
        #expect(throws: RTPError.self) { try RTPPacketView(parsing: [0x80, 0x60, 0, 1][...]) }
        // Says it has an extension of 100 words that is not there.
        var short: [UInt8] = [0x90, 0x60, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xbe, 0xde, 0, 100]
        short += [0, 0, 0, 0]
        #expect(throws: RTPError.self) { try RTPPacketView(parsing: short[...]) }
    }

    @Test func vp8KeyframesAreToldFromInterframesWithTheirSize() {
        let key: [UInt8] = [0x10, 0x00, 0x00, 0x00, 0x9d, 0x01, 0x2a, 0x80, 0x02, 0xe0, 0x01]
        let inter: [UInt8] = [0x10, 0x01, 0x00, 0x00]
        let middle: [UInt8] = [0x00, 0x55, 0x55]
        let k = KeyframeInspection.vp8(key[...])
        #expect(k?.isKeyframe == true && k?.width == 640 && k?.height == 480)
        #expect(KeyframeInspection.vp8(inter[...])?.isKeyframe == false)
        #expect(KeyframeInspection.vp8(middle[...]) == nil)
    }

    @Test func h264KeyframeStartsAreFoundInEachPacketisation() {
        #expect(KeyframeInspection.h264StartsKeyframe([0x65, 0x88][...]))                          // IDR slice
        #expect(KeyframeInspection.h264StartsKeyframe([0x18, 0x00, 0x02, 0x67, 0x42, 0x00, 0x01, 0x68][...]))  // STAP-A with SPS
        #expect(KeyframeInspection.h264StartsKeyframe([0x7c, 0x85, 0x88][...]))                    // FU-A start of IDR
        #expect(!KeyframeInspection.h264StartsKeyframe([0x7c, 0x05, 0x88][...]))                   // FU-A middle
        #expect(!KeyframeInspection.h264StartsKeyframe([0x41, 0x9a][...]))                         // non-IDR slice
    }
}
