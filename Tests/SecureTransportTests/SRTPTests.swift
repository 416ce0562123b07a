import RTP
import SecureTransport
import Testing

@Suite("SRTP and SRTCP (libsrtp2)")
struct SRTPTests {
    func packet(sequence: UInt16, payload: [UInt8] = Array(0..<100)) -> [UInt8] {
        var out: [UInt8] = []
        RTPHeader(payloadType: 96, sequenceNumber: sequence, timestamp: 3000 * UInt32(sequence), ssrc: 0xcafe)
            .write(to: &out)
        return out + payload
    }

    func sessions(_ profile: SRTPProfile) throws -> (SRTPSession, SRTPSession) {
        let key = [UInt8](repeating: 0x11, count: profile.keyLength), salt = [UInt8](repeating: 0x22, count: profile.saltLength)
        return (try SRTPSession(profile: profile, key: key, salt: salt, direction: .outbound),
                try SRTPSession(profile: profile, key: key, salt: salt, direction: .inbound))
    }

    @Test(arguments: SRTPProfile.allCases)
    func packetsRoundTripEncrypted(profile: SRTPProfile) throws {
        let (sender, receiver) = try sessions(profile)
        for sequence in UInt16(1)...5 {
            let clear = packet(sequence: sequence)
            var wire = clear
            try sender.protectRTP(&wire)
            #expect(wire.count == clear.count + (profile == .aeadAES128GCM ? 16 : 10), "the tag")
            #expect(Array(wire[0..<12]) == Array(clear[0..<12]), "the header stays clear")
            #expect(Array(wire[12..<clear.count]) != Array(clear[12...]), "the payload does not")
            try receiver.unprotectRTP(&wire)
            #expect(wire == clear)
        }
    }

    @Test(arguments: SRTPProfile.allCases)
    func tamperingAndReplayAreRefused(profile: SRTPProfile) throws {
        let (sender, receiver) = try sessions(profile)
        var wire = packet(sequence: 7)
        try sender.protectRTP(&wire)
        var tampered = wire
        tampered[20] ^= 0x01
        #expect(throws: SRTPError.authenticationFailed) { try receiver.unprotectRTP(&tampered) }
        var first = wire
        try receiver.unprotectRTP(&first)
        var again = wire
        #expect(throws: SRTPError.replayed) { try receiver.unprotectRTP(&again) }
    }

    @Test func rtcpRoundTripsAndAWrongKeyFails() throws {
        let (sender, receiver) = try sessions(.aes128CMHMACSHA1_80)
        var clear: [UInt8] = []
        RTCPPacket.pictureLossIndication(sender: 1, media: 0xcafe).write(to: &clear)
        var wire = clear
        try sender.protectRTCP(&wire)
        #expect(wire.count > clear.count)
        var copy = wire
        try receiver.unprotectRTCP(&copy)
        #expect(copy == clear)
        let stranger = try SRTPSession(profile: .aes128CMHMACSHA1_80, key: [UInt8](repeating: 9, count: 16),
                                       salt: [UInt8](repeating: 9, count: 14), direction: .inbound)
        #expect(throws: SRTPError.authenticationFailed) { try stranger.unprotectRTCP(&wire) }
    }

    @Test func exportedKeyingMaterialSplitsByRole() {
        let profile = SRTPProfile.aes128CMHMACSHA1_80
        let material = (0..<SRTPKeys.exportLength(profile)).map(UInt8.init)   // 60 bytes
        let client = SRTPKeys(exported: material, profile: profile, isClient: true)
        let server = SRTPKeys(exported: material, profile: profile, isClient: false)
        #expect(client.localKey == Array(0..<16) && server.localKey == Array(16..<32))
        #expect(client.localSalt == Array(32..<46) && server.localSalt == Array(46..<60))
        #expect(client.localKey == server.remoteKey && client.remoteSalt == server.localSalt)
        #expect(SRTPKeys.exportLength(.aeadAES128GCM) == 56)
    }
}
