internal import OpenSSLSupport
import MediaTypes
import WireFormat

/// The SRTP protection profiles camagent negotiates in DTLS (RFC 5764,
/// RFC 7714), with their DTLS-SRTP profile numbers.
public enum SRTPProfile: UInt16, Sendable, CaseIterable {
    case aes128CMHMACSHA1_80 = 0x0001
    case aeadAES128GCM = 0x0007

    public var keyLength: Int { 16 }
    public var saltLength: Int { self == .aeadAES128GCM ? 12 : 14 }
    /// The OpenSSL name, for SSL_CTX_set_tlsext_use_srtp.
    public var openSSLName: String {
        self == .aeadAES128GCM ? "SRTP_AEAD_AES_128_GCM" : "SRTP_AES128_CM_SHA1_80"
    }
}

public enum SRTPError: Error, Hashable, Sendable, CustomStringConvertible {
    case setupFailed(String)
    case authenticationFailed
    case replayed
    /// Too short for its header and trailer, or not RTP version 2.
    case malformed
    case failed(String)

    public var description: String {
        switch self {
        case .setupFailed(let why): "SRTP session could not be created: \(why)"
        case .authenticationFailed: "SRTP packet failed authentication"
        case .replayed: "SRTP packet replayed or too old"
        case .malformed: "SRTP packet too short or not RTP"
        case .failed(let why): "SRTP failed: \(why)"
        }
    }
}

/// The keys DTLS-SRTP exports (RFC 5764 §4.2): client key, server key, client
/// salt, server salt, split into what this side sends with and receives with.
public struct SRTPKeys: Hashable, Sendable {
    public var localKey: [UInt8], localSalt: [UInt8]
    public var remoteKey: [UInt8], remoteSalt: [UInt8]

    public static func exportLength(_ profile: SRTPProfile) -> Int { 2 * (profile.keyLength + profile.saltLength) }

    public init(exported material: [UInt8], profile: SRTPProfile, isClient: Bool) {
        precondition(material.count == Self.exportLength(profile), "wrong amount of keying material")
        let k = profile.keyLength, s = profile.saltLength
        let clientKey = Array(material[0..<k]), serverKey = Array(material[k..<(2 * k)])
        let clientSalt = Array(material[(2 * k)..<(2 * k + s)]), serverSalt = Array(material[(2 * k + s)...])
        (localKey, localSalt) = isClient ? (clientKey, clientSalt) : (serverKey, serverSalt)
        (remoteKey, remoteSalt) = isClient ? (serverKey, serverSalt) : (clientKey, clientSalt)
    }
}

/// One direction of SRTP and SRTCP with one master key (RFC 3711, RFC 7714):
/// outbound protects every SSRC this side sends, inbound unprotects every SSRC
/// it receives. Packets are transformed in place in the caller's buffer, which
/// should have `maximumTrailer` bytes of spare capacity for the tag.
///
/// Written over OpenSSL's AES and SHA-1 rather than libsrtp2: Debian's libsrtp2
/// does its AES through NSS, which makes a cipher context (allocations, locks)
/// for every packet; here each key is set up once. libsrtp2 is still the
/// reference the unit tests check this against, packet for packet.
public final class SRTPSession: @unchecked Sendable {   // all state under `state`'s lock
    public enum Direction: Sendable { case outbound, inbound }
    /// The most a protected packet grows by: AES-GCM's tag and SRTCP's index.
    public static let maximumTrailer = AESGCM.tagLength + 4

    /// How far back a late RTP packet is still taken (libsrtp2's default is 128;
    /// a keyframe's retransmissions can come from further back).
    static let rtpWindow = 1024
    static let rtcpWindow = 128

    private enum Cipher {
        case counter(AESCounterMode, HMACSHA1)
        case gcm(AESGCM)
    }

    /// What one of RTP and RTCP is protected with: its session keys (RFC 3711 §4.3).
    private struct Keys {
        let cipher: Cipher
        let salt: [UInt8]
    }

    private struct Streams {
        /// Outbound: the highest RTP index sent per SSRC; a NACK's retransmission may go out again.
        var sentRTP: [UInt32: UInt64] = [:]
        var sentRTCP: [UInt32: UInt32] = [:]
        var receivedRTP: [UInt32: SRTPReplayWindow] = [:]
        var receivedRTCP: [UInt32: SRTPReplayWindow] = [:]
    }

    private let profile: SRTPProfile
    private let direction: Direction
    private let rtp: Keys, rtcp: Keys
    private let state = PThreadLocked(Streams())

    public init(profile: SRTPProfile, key: [UInt8], salt: [UInt8], direction: Direction) throws(SRTPError) {
        precondition(key.count == profile.keyLength && salt.count == profile.saltLength, "key and salt sizes")
        self.profile = profile
        self.direction = direction
        func keys(_ encryption: SRTPKeyDerivation.Label, _ authentication: SRTPKeyDerivation.Label,
                  _ salting: SRTPKeyDerivation.Label) throws(SRTPError) -> Keys {
            guard let sessionKey = SRTPKeyDerivation.derive(masterKey: key, masterSalt: salt, label: encryption, length: 16),
                  let sessionSalt = SRTPKeyDerivation.derive(masterKey: key, masterSalt: salt, label: salting,
                                                             length: profile.saltLength) else {
                throw .setupFailed("key derivation: \(openSSLReason())")
            }
            switch profile {
            case .aes128CMHMACSHA1_80:
                guard let authKey = SRTPKeyDerivation.derive(masterKey: key, masterSalt: salt, label: authentication, length: 20),
                      let cipher = AESCounterMode(key: sessionKey) else {
                    throw .setupFailed("AES-128-CTR: \(openSSLReason())")
                }
                return Keys(cipher: .counter(cipher, HMACSHA1(key: authKey)), salt: sessionSalt)
            case .aeadAES128GCM:
                guard let cipher = AESGCM(key: sessionKey, sealing: direction == .outbound) else {
                    throw .setupFailed("AES-128-GCM: \(openSSLReason())")
                }
                return Keys(cipher: .gcm(cipher), salt: sessionSalt)
            }
        }
        rtp = try keys(.rtpEncryption, .rtpAuthentication, .rtpSalt)
        rtcp = try keys(.rtcpEncryption, .rtcpAuthentication, .rtcpSalt)
    }

    /// The authentication tag's length: 10 bytes (HMAC-SHA1-80) or 16 (GCM).
    private var tagLength: Int { profile == .aeadAES128GCM ? AESGCM.tagLength : 10 }

    // MARK: RTP

    public func protectRTP(_ packet: inout [UInt8]) throws(SRTPError) {
        precondition(direction == .outbound)
        guard let header = Self.rtpHeaderLength(packet, within: packet.count) else { throw .malformed }
        let sequence = packet.bigEndianUInt16(at: 2)
        let ssrc = packet.bigEndianUInt32(at: 8)
        let tag = tagLength
        try state.withLock { streams throws(SRTPError) in
            let index: UInt64
            if let highest = streams.sentRTP[ssrc] {
                guard let guess = srtpPacketIndex(sequence: sequence, highest: highest) else { throw .replayed }
                index = guess
                if guess > highest { streams.sentRTP[ssrc] = guess }
            } else {
                index = UInt64(sequence)
                streams.sentRTP[ssrc] = index
            }
            let end = packet.count
            packet.append(contentsOf: repeatElement(0, count: tag))
            let ok = packet.withUnsafeMutableBytes { bytes in
                Self.withRTPIV(rtp, ssrc: ssrc, index: index) { iv in
                    switch rtp.cipher {
                    case .counter(let cipher, let mac):
                        guard cipher.apply(iv: iv, to: UnsafeMutableRawBufferPointer(rebasing: bytes[header..<end])) else {
                            return false
                        }
                        Self.authenticate(mac, UnsafeRawBufferPointer(rebasing: bytes[0..<end]), rollover: UInt32(index >> 16),
                                          tagInto: UnsafeMutableRawBufferPointer(rebasing: bytes[end...]))
                        return true
                    case .gcm(let cipher):
                        return cipher.seal(iv: iv, associated: UnsafeRawBufferPointer(rebasing: bytes[0..<header]),
                                           text: UnsafeMutableRawBufferPointer(rebasing: bytes[header..<end]),
                                           tag: bytes.baseAddress! + end)
                    }
                }
            }
            guard ok else {
                packet.removeLast(tag)
                throw .failed("RTP encryption: \(openSSLReason())")
            }
        }
    }

    public func unprotectRTP(_ packet: inout [UInt8]) throws(SRTPError) {
        precondition(direction == .inbound)
        let tag = tagLength
        guard packet.count >= 12 + tag, let header = Self.rtpHeaderLength(packet, within: packet.count - tag) else {
            throw .malformed
        }
        let sequence = packet.bigEndianUInt16(at: 2)
        let ssrc = packet.bigEndianUInt32(at: 8)
        let end = packet.count - tag
        try state.withLock { streams throws(SRTPError) in
            let window = streams.receivedRTP[ssrc]
            let index: UInt64
            if let window {
                guard let guess = srtpPacketIndex(sequence: sequence, highest: window.highest),
                      window.verdict(guess) == .fresh else { throw .replayed }
                index = guess
            } else {
                index = UInt64(sequence)
            }
            let authentic = packet.withUnsafeMutableBytes { bytes in
                Self.withRTPIV(rtp, ssrc: ssrc, index: index) { iv in
                    switch rtp.cipher {
                    case .counter(let cipher, let mac):
                        guard Self.verify(mac, UnsafeRawBufferPointer(rebasing: bytes[0..<end]), rollover: UInt32(index >> 16),
                                          tag: UnsafeRawBufferPointer(rebasing: bytes[end...])) else { return false }
                        return cipher.apply(iv: iv, to: UnsafeMutableRawBufferPointer(rebasing: bytes[header..<end]))
                    case .gcm(let cipher):
                        return cipher.open(iv: iv, associated: UnsafeRawBufferPointer(rebasing: bytes[0..<header]),
                                           text: UnsafeMutableRawBufferPointer(rebasing: bytes[header..<end]),
                                           tag: bytes.baseAddress! + end)
                    }
                }
            }
            guard authentic else { throw .authenticationFailed }
            if let window { window.accept(index) } else {
                streams.receivedRTP[ssrc] = SRTPReplayWindow(first: index, size: Self.rtpWindow)
            }
        }
        packet.removeLast(tag)
    }

    // MARK: RTCP

    public func protectRTCP(_ packet: inout [UInt8]) throws(SRTPError) {
        precondition(direction == .outbound)
        guard packet.count >= 8, packet[0] >> 6 == 2 else { throw .malformed }
        let ssrc = packet.bigEndianUInt32(at: 4)
        let tag = tagLength
        try state.withLock { streams throws(SRTPError) in
            let index = ((streams.sentRTCP[ssrc] ?? 0) + 1) & 0x7fff_ffff
            streams.sentRTCP[ssrc] = index
            let flagged = 0x8000_0000 | index   // E: the payload is encrypted
            let end = packet.count
            packet.append(contentsOf: repeatElement(0, count: tag + 4))
            let ok = packet.withUnsafeMutableBytes { bytes in
                Self.withRTCPIV(rtcp, ssrc: ssrc, index: index) { iv in
                    let text = UnsafeMutableRawBufferPointer(rebasing: bytes[8..<end])
                    switch rtcp.cipher {
                    case .counter(let cipher, let mac):
                        // header, encrypted payload, E and index, tag (RFC 3711 §3.4)
                        Self.write32(flagged, to: bytes, at: end)
                        guard cipher.apply(iv: iv, to: text) else { return false }
                        Self.authenticate(mac, UnsafeRawBufferPointer(rebasing: bytes[0..<(end + 4)]), rollover: nil,
                                          tagInto: UnsafeMutableRawBufferPointer(rebasing: bytes[(end + 4)...]))
                        return true
                    case .gcm(let cipher):
                        // header, encrypted payload, tag, E and index (RFC 7714 §9)
                        Self.write32(flagged, to: bytes, at: end + tag)
                        return cipher.seal(iv: iv, associated: UnsafeRawBufferPointer(rebasing: bytes[0..<8]),
                                           UnsafeRawBufferPointer(rebasing: bytes[(end + tag)...]),
                                           text: text, tag: bytes.baseAddress! + end)
                    }
                }
            }
            guard ok else {
                packet.removeLast(tag + 4)
                throw .failed("RTCP encryption: \(openSSLReason())")
            }
        }
    }

    public func unprotectRTCP(_ packet: inout [UInt8]) throws(SRTPError) {
        precondition(direction == .inbound)
        let tag = tagLength
        guard packet.count >= 8 + tag + 4, packet[0] >> 6 == 2 else { throw .malformed }
        let ssrc = packet.bigEndianUInt32(at: 4)
        let isGCM = profile == .aeadAES128GCM
        let indexAt = isGCM ? packet.count - 4 : packet.count - tag - 4
        let flagged = packet.bigEndianUInt32(at: indexAt)
        let index = flagged & 0x7fff_ffff, encrypted = flagged & 0x8000_0000 != 0
        let payloadEnd = packet.count - tag - 4
        try state.withLock { streams throws(SRTPError) in
            let window = streams.receivedRTCP[ssrc]
            if let window, window.verdict(UInt64(index)) != .fresh { throw .replayed }
            let authentic = packet.withUnsafeMutableBytes { bytes in
                Self.withRTCPIV(rtcp, ssrc: ssrc, index: index) { iv in
                    switch rtcp.cipher {
                    case .counter(let cipher, let mac):
                        let tagStart = payloadEnd + 4
                        guard Self.verify(mac, UnsafeRawBufferPointer(rebasing: bytes[0..<tagStart]), rollover: nil,
                                          tag: UnsafeRawBufferPointer(rebasing: bytes[tagStart...])) else { return false }
                        return !encrypted || cipher.apply(iv: iv, to: UnsafeMutableRawBufferPointer(rebasing: bytes[8..<payloadEnd]))
                    case .gcm(let cipher):
                        let flag = UnsafeRawBufferPointer(rebasing: bytes[indexAt...])
                        // Unencrypted (E = 0), the whole packet is associated data (RFC 7714 §9.3).
                        let clearEnd = encrypted ? 8 : payloadEnd
                        return cipher.open(iv: iv, associated: UnsafeRawBufferPointer(rebasing: bytes[0..<clearEnd]), flag,
                                           text: UnsafeMutableRawBufferPointer(rebasing: bytes[clearEnd..<payloadEnd]),
                                           tag: bytes.baseAddress! + payloadEnd)
                    }
                }
            }
            guard authentic else { throw .authenticationFailed }
            if let window { window.accept(UInt64(index)) } else {
                streams.receivedRTCP[ssrc] = SRTPReplayWindow(first: UInt64(index), size: Self.rtcpWindow)
            }
        }
        packet.removeLast(packet.count - payloadEnd)
    }

    // MARK: IVs, tags and headers

    /// The RTP IV: AES-CM's 16 bytes (salt ⊕ SSRC·2^64 ⊕ index·2^16, RFC 3711 §4.1.1) or
    /// GCM's 12 (salt ⊕ 00 00 ‖ SSRC ‖ ROC ‖ SEQ, RFC 7714 §8.1), on the stack.
    private static func withRTPIV<R>(_ keys: Keys, ssrc: UInt32, index: UInt64,
                                     _ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { iv in
            iv.initialize(repeating: 0)
            for i in 0..<keys.salt.count { iv[i] = keys.salt[i] }
            // Both layouts put the SSRC at bytes 2...5 (GCM) or 4...7 (CM) and the 48-bit index right after it.
            let ssrcAt = keys.salt.count == 12 ? 2 : 4
            for i in 0..<4 { iv[ssrcAt + i] ^= UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * i)) }
            for i in 0..<6 { iv[ssrcAt + 4 + i] ^= UInt8(truncatingIfNeeded: index >> (40 - 8 * i)) }
            return body(UnsafeRawBufferPointer(start: iv.baseAddress, count: keys.salt.count == 12 ? 12 : 16))
        }
    }

    /// The SRTCP IV: as RTP's with the 31-bit SRTCP index for the packet index
    /// (RFC 3711 §4.1.1); GCM's is salt ⊕ 00 00 ‖ SSRC ‖ 00 00 ‖ index (RFC 7714 §9.1).
    private static func withRTCPIV<R>(_ keys: Keys, ssrc: UInt32, index: UInt32,
                                      _ body: (UnsafeRawBufferPointer) -> R) -> R {
        withRTPIV(keys, ssrc: ssrc, index: UInt64(index), body)
    }

    /// Appends the HMAC-SHA1 of the packet (and, for RTP, its rollover counter) truncated to the tag's room.
    private static func authenticate(_ mac: HMACSHA1, _ message: UnsafeRawBufferPointer, rollover: UInt32?,
                                     tagInto tag: UnsafeMutableRawBufferPointer) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: HMACSHA1.length) { digest in
            withRollover(rollover) { suffix in mac.authenticate(message, suffix, into: digest.baseAddress!) }
            tag.copyMemory(from: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(digest)[0..<tag.count]))
        }
    }

    private static func verify(_ mac: HMACSHA1, _ message: UnsafeRawBufferPointer, rollover: UInt32?,
                               tag: UnsafeRawBufferPointer) -> Bool {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: HMACSHA1.length) { digest in
            withRollover(rollover) { suffix in mac.authenticate(message, suffix, into: digest.baseAddress!) }
            return constantTimeEqual(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(digest)[0..<tag.count]), tag)
        }
    }

    /// SRTP authenticates the rollover counter after the packet (RFC 3711 §4.2); SRTCP nothing more.
    private static func withRollover(_ rollover: UInt32?, _ body: (UnsafeRawBufferPointer) -> Void) {
        guard let rollover else { return body(.empty) }
        var bigEndian = rollover.bigEndian
        withUnsafeBytes(of: &bigEndian) { body($0) }
    }

    /// The RTP header's length with its CSRCs and extension, when it fits within `available` bytes.
    private static func rtpHeaderLength(_ packet: [UInt8], within available: Int) -> Int? {
        guard available >= 12, packet[0] >> 6 == 2 else { return nil }
        var length = 12 + 4 * Int(packet[0] & 0x0f)
        if packet[0] & 0x10 != 0 {
            guard available >= length + 4 else { return nil }
            length += 4 + 4 * (Int(packet[length + 2]) << 8 | Int(packet[length + 3]))
        }
        return length <= available ? length : nil
    }

    private static func write32(_ value: UInt32, to bytes: UnsafeMutableRawBufferPointer, at offset: Int) {
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (24 - 8 * i)) }
    }
}
