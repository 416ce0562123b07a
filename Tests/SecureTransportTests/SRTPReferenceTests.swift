import RTP
import SecureTransport
import Testing

/// camagent's SRTP against libsrtp2, packet for packet: the same keys and
/// packets must give the same bytes on the wire, and each side must open what
/// the other sealed, across sequence-number wraps, CSRCs, header extensions,
/// retransmissions and late packets.
@Suite("SRTP against libsrtp2")
struct SRTPReferenceTests {
    struct Keys {
        let key: [UInt8], salt: [UInt8]
        init(_ profile: SRTPProfile, seed: UInt8) {
            key = (0..<profile.keyLength).map { UInt8(truncatingIfNeeded: Int($0) * 37 + Int(seed)) }
            salt = (0..<profile.saltLength).map { UInt8(truncatingIfNeeded: Int($0) * 11 + Int(seed) * 3 + 1) }
        }
    }

    /// An RTP packet with `csrcs` CSRCs, an optional one-byte-header extension and `size` payload bytes.
    static func rtp(sequence: UInt16, ssrc: UInt32, csrcs: Int = 0, extensionWords: Int? = nil, size: Int) -> [UInt8] {
        var out: [UInt8] = []
        RTPHeader(payloadType: 96, sequenceNumber: sequence, timestamp: 90 * UInt32(sequence), ssrc: ssrc).write(to: &out)
        out[0] |= UInt8(csrcs)
        for c in 0..<csrcs { out += [0, 0, 0, UInt8(c + 1)] }
        if let words = extensionWords {
            out[0] |= 0x10
            out += [0xbe, 0xde, 0, UInt8(words)] + (0..<(4 * words)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        }
        return out + (0..<size).map { UInt8(truncatingIfNeeded: Int($0) &* 31 &+ Int(sequence)) }
    }

    /// camagent's and libsrtp2's sessions for one key: each side's sender and receiver.
    static func bothSides(_ profile: SRTPProfile, seed: UInt8) throws
        -> (ours: SRTPSession, reference: LibSRTPReference, oursIn: SRTPSession, referenceIn: LibSRTPReference) {
        let keys = Keys(profile, seed: seed)
        return (try SRTPSession(profile: profile, key: keys.key, salt: keys.salt, direction: .outbound),
                try LibSRTPReference(profile: profile, key: keys.key, salt: keys.salt, outbound: true),
                try SRTPSession(profile: profile, key: keys.key, salt: keys.salt, direction: .inbound),
                try LibSRTPReference(profile: profile, key: keys.key, salt: keys.salt, outbound: false))
    }

    /// The sequence numbers a stream sends: across a wrap, with a retransmission of an earlier one.
    static let sequences: [UInt16] = [65_530, 65_531, 65_533, 65_532, 65_534, 65_535, 0, 1, 2, 65_531, 3, 4, 40, 41]

    @Test(arguments: SRTPProfile.allCases)
    func rtpMatchesLibSRTPByteForByte(profile: SRTPProfile) throws {
        let (ours, reference, oursIn, referenceIn) = try Self.bothSides(profile, seed: 5)
        var checked = 0
        for (n, sequence) in Self.sequences.enumerated() {
            for ssrc: UInt32 in [0x1234_5678, 0xcafe] {
                let clear = Self.rtp(sequence: sequence, ssrc: ssrc, csrcs: n % 3, extensionWords: n % 2 == 0 ? n % 4 : nil,
                                     size: [0, 1, 15, 16, 17, 160, 1100][n % 7])
                var sealed = clear
                try ours.protectRTP(&sealed)
                let expected = try reference.protectRTP(clear)
                #expect(sealed == expected, "seq \(sequence) ssrc \(ssrc)")
                if sequence == 65_531, n > 1 { continue }   // the retransmission: a receiver refuses it as a replay
                var opened = expected
                try oursIn.unprotectRTP(&opened)
                #expect(opened == clear)
                #expect(try referenceIn.unprotectRTP(sealed) == clear)
                checked += 1
            }
        }
        #expect(checked == 2 * (Self.sequences.count - 1))
    }

    @Test(arguments: SRTPProfile.allCases)
    func rtcpMatchesLibSRTPByteForByte(profile: SRTPProfile) throws {
        let (ours, reference, oursIn, referenceIn) = try Self.bothSides(profile, seed: 9)
        for round in 0..<5 {
            for sender: UInt32 in [1, 0xdead_beef] {
                var clear: [UInt8] = []
                RTCPPacket.receiverReport(ssrc: sender, reports: []).write(to: &clear)
                RTCPPacket.pictureLossIndication(sender: sender, media: 0xcafe).write(to: &clear)
                clear += round % 2 == 0 ? [] : { var b: [UInt8] = []; RTCPPacket.bye(ssrcs: [sender]).write(to: &b); return b }()
                var sealed = clear
                try ours.protectRTCP(&sealed)
                let expected = try reference.protectRTCP(clear)
                #expect(sealed == expected, "round \(round) sender \(sender)")
                var opened = expected
                try oursIn.unprotectRTCP(&opened)
                #expect(opened == clear)
                #expect(try referenceIn.unprotectRTCP(sealed) == clear)
            }
        }
    }

    @Test(arguments: SRTPProfile.allCases)
    func lateDuplicateAndAncientPackets(profile: SRTPProfile) throws {
        let keys = Keys(profile, seed: 2)
        let sender = try SRTPSession(profile: profile, key: keys.key, salt: keys.salt, direction: .outbound)
        let receiver = try SRTPSession(profile: profile, key: keys.key, salt: keys.salt, direction: .inbound)
        var sealed: [UInt16: [UInt8]] = [:]
        for sequence in UInt16(100)...1300 {
            var packet = Self.rtp(sequence: sequence, ssrc: 7, size: 20)
            try sender.protectRTP(&packet)
            sealed[sequence] = packet
        }
        func open(_ sequence: UInt16) throws {
            var packet = sealed[sequence]!
            try receiver.unprotectRTP(&packet)
        }
        try open(100)
        try open(1200)               // a jump forward
        try open(1100)               // late, within the 1024 window
        #expect(throws: SRTPError.replayed) { try open(1100) }   // twice
        #expect(throws: SRTPError.replayed) { try open(150) }    // more than 1024 behind
        try open(1300)
        try open(277)                // 1023 behind: still taken
        var short = [UInt8](sealed[1201]!.prefix(20))
        #expect(throws: SRTPError.malformed) { try receiver.unprotectRTP(&short) }
    }
}
