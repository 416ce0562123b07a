internal import CSRTP
import MediaTypes

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
    case setupFailed(code: Int)
    case authenticationFailed
    case replayed
    case failed(code: Int)

    init(_ status: srtp_err_status_t) {
        switch status {
        case srtp_err_status_auth_fail: self = .authenticationFailed
        case srtp_err_status_replay_fail, srtp_err_status_replay_old: self = .replayed
        default: self = .failed(code: Int(status.rawValue))
        }
    }

    public var description: String {
        switch self {
        case .setupFailed(let c): "SRTP session could not be created (libsrtp2 error \(c))"
        case .authenticationFailed: "SRTP packet failed authentication"
        case .replayed: "SRTP packet replayed or too old"
        case .failed(let c): "SRTP failed (libsrtp2 error \(c))"
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

/// One direction of SRTP and SRTCP with one master key: outbound protects
/// every SSRC this side sends, inbound unprotects every SSRC it receives.
/// Packets are transformed in place in the caller's buffer, which must have
/// `maximumTrailer` bytes of spare capacity for the tag.
public final class SRTPSession: @unchecked Sendable {
    public enum Direction: Sendable { case outbound, inbound }
    public static let maximumTrailer = Int(CSRTP_MAX_TRAILER_LEN)

    private let session: srtp_t
    /// libsrtp2 sessions are not thread-safe; one lock per session.
    private let lock = PThreadLocked(())

    private static let initialized: Bool = srtp_init() == srtp_err_status_ok

    public init(profile: SRTPProfile, key: [UInt8], salt: [UInt8], direction: Direction) throws(SRTPError) {
        precondition(key.count == profile.keyLength && salt.count == profile.saltLength, "key and salt sizes")
        guard Self.initialized else { throw .setupFailed(code: -1) }
        var policy = srtp_policy_t()
        switch profile {
        case .aes128CMHMACSHA1_80:
            srtp_crypto_policy_set_rtp_default(&policy.rtp)
            srtp_crypto_policy_set_rtcp_default(&policy.rtcp)
        case .aeadAES128GCM:
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        }
        policy.ssrc.type = direction == .outbound ? ssrc_any_outbound : ssrc_any_inbound
        policy.window_size = 1024
        policy.allow_repeat_tx = 1   // retransmissions answering NACKs resend the same sequence number
        var master = key + salt
        var created: srtp_t?
        let status = master.withUnsafeMutableBufferPointer { buffer in
            policy.key = buffer.baseAddress
            return srtp_create(&created, &policy)
        }
        guard status == srtp_err_status_ok, let created else { throw .setupFailed(code: Int(status.rawValue)) }
        session = created
    }

    deinit { srtp_dealloc(session) }

    public func protectRTP(_ packet: inout [UInt8]) throws(SRTPError) {
        try transform(&packet, grow: true, srtp_protect)
    }

    public func unprotectRTP(_ packet: inout [UInt8]) throws(SRTPError) {
        try transform(&packet, grow: false, srtp_unprotect)
    }

    public func protectRTCP(_ packet: inout [UInt8]) throws(SRTPError) {
        try transform(&packet, grow: true, srtp_protect_rtcp)
    }

    public func unprotectRTCP(_ packet: inout [UInt8]) throws(SRTPError) {
        try transform(&packet, grow: false, srtp_unprotect_rtcp)
    }

    private func transform(_ packet: inout [UInt8], grow: Bool,
                           _ function: (srtp_t?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int32>?) -> srtp_err_status_t)
        throws(SRTPError) {
        var length = Int32(packet.count)
        if grow { packet.append(contentsOf: repeatElement(0, count: Self.maximumTrailer)) }
        let status = lock.withLock { _ in
            packet.withUnsafeMutableBytes { function(session, $0.baseAddress, &length) }
        }
        guard status == srtp_err_status_ok else {
            if grow { packet.removeLast(Self.maximumTrailer) }
            throw SRTPError(status)
        }
        packet.removeLast(packet.count - Int(length))
    }
}
