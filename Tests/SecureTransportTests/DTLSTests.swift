import Foundation
import SecureTransport
import Testing

@Suite("DTLS 1.2 with use_srtp (OpenSSL)")
struct DTLSTests {
    /// Runs the handshake between two in-process transports, passing every
    /// datagram across, until both are connected or one throws.
    func handshake(_ client: DTLSTransport, _ server: DTLSTransport) throws {
        var toServer = try client.start()
        var rounds = 0
        while client.state == .handshaking || server.state == .handshaking {
            rounds += 1
            #expect(rounds < 20, "the handshake should finish in a few flights")
            if rounds >= 20 { return }
            var toClient: [[UInt8]] = []
            for d in toServer { toClient += try server.receive(d) }
            toServer = []
            for d in toClient { toServer += try client.receive(d) }
        }
    }

    @Test func handshakeAgreesOnSRTPKeysBothWays() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        #expect(a.fingerprint.count == 32 * 3 - 1 && a.fingerprint != b.fingerprint)
        let client = try DTLSTransport(certificate: a, role: .client, remoteFingerprint: b.fingerprint)
        let server = try DTLSTransport(certificate: b, role: .server, remoteFingerprint: a.fingerprint)
        try handshake(client, server)
        #expect(client.state == .connected && server.state == .connected)
        #expect(client.srtpProfile == .aeadAES128GCM && server.srtpProfile == .aeadAES128GCM)
        let c = try #require(client.srtpKeys), s = try #require(server.srtpKeys)
        #expect(c.localKey == s.remoteKey && c.localSalt == s.remoteSalt)
        #expect(c.remoteKey == s.localKey && c.localKey != c.remoteKey)

        // The exported keys work: what the client protects, the server opens.
        let profile = try #require(client.srtpProfile)
        let sender = try SRTPSession(profile: profile, key: c.localKey, salt: c.localSalt, direction: .outbound)
        let receiver = try SRTPSession(profile: profile, key: s.remoteKey, salt: s.remoteSalt, direction: .inbound)
        let clear: [UInt8] = [0x80, 0x60, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2] + Array(repeating: 7, count: 50)
        var wire = clear
        try sender.protectRTP(&wire)
        try receiver.unprotectRTP(&wire)
        #expect(wire == clear)
    }

    @Test func aPeerOfferingOnlyAESCMGetsAESCM() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        let client = try DTLSTransport(certificate: a, role: .client, remoteFingerprint: b.fingerprint,
                                       profiles: [.aes128CMHMACSHA1_80])
        let server = try DTLSTransport(certificate: b, role: .server, remoteFingerprint: a.fingerprint)
        try handshake(client, server)
        #expect(client.srtpProfile == .aes128CMHMACSHA1_80 && server.srtpProfile == .aes128CMHMACSHA1_80)
    }

    @Test func aCertificateOtherThanTheAnnouncedOneIsRefused() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate(), impostor = try DTLSCertificate()
        let client = try DTLSTransport(certificate: a, role: .client, remoteFingerprint: b.fingerprint)
        let server = try DTLSTransport(certificate: impostor, role: .server, remoteFingerprint: a.fingerprint)
        #expect(throws: DTLSError.fingerprintMismatch(expected: b.fingerprint, got: impostor.fingerprint)) {
            try handshake(client, server)
        }
        #expect(client.state == .failed && client.srtpKeys == nil)
    }

    /// The server's last flight (ChangeCipherSpec, Finished) ends the handshake
    /// on its side; when it is lost, the client's timer sends the client's flight
    /// again, and the connected server must answer with its last flight once
    /// more (RFC 6347 4.2.4), or the client never connects.
    @Test(.timeLimit(.minutes(1)))
    func aLostLastFlightIsSentAgainWhenThePeerRetransmits() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        let client = try DTLSTransport(certificate: a, role: .client, remoteFingerprint: b.fingerprint)
        let server = try DTLSTransport(certificate: b, role: .server, remoteFingerprint: a.fingerprint)
        var toServer = try client.start()
        for _ in 0..<10 where server.state == .handshaking {
            var toClient: [[UInt8]] = []
            for d in toServer { toClient += try server.receive(d) }
            toServer = []
            if server.state == .connected { break }   // its last flight, toClient, is lost
            for d in toClient { toServer += try client.receive(d) }
        }
        #expect(server.state == .connected && client.state == .handshaking)

        // OpenSSL's first retransmission timer is a second.
        var delay = try #require(client.retransmitDelay, "the client waits for the server's last flight")
        while delay > 0 {
            Thread.sleep(forTimeInterval: min(delay, 0.1))
            delay = try #require(client.retransmitDelay)
        }
        let again = client.retransmit()
        #expect(!again.isEmpty, "the client sends its flight again")
        var answer: [[UInt8]] = []
        for d in again { answer += try server.receive(d) }
        #expect(!answer.isEmpty, "the connected server resends its last flight")
        for d in answer { _ = try client.receive(d) }
        #expect(client.state == .connected && server.state == .connected)
        let c = try #require(client.srtpKeys), s = try #require(server.srtpKeys)
        #expect(c.localKey == s.remoteKey && c.remoteKey == s.localKey)
    }

    @Test func flightsFitTheMTU() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        let client = try DTLSTransport(certificate: a, role: .client, remoteFingerprint: b.fingerprint)
        let server = try DTLSTransport(certificate: b, role: .server, remoteFingerprint: a.fingerprint)
        let hello = try client.start()
        #expect(hello.count == 1 && hello[0][0] == 22, "one ClientHello handshake record")
        let reply = try server.receive(hello[0])
        #expect(!reply.isEmpty && reply.allSatisfy { $0.count <= DTLSTransport.mtu })
        #expect(client.retransmitDelay != nil, "the client waits for the server's flight with a timer")
    }
}
