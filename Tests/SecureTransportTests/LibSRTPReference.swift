import CSRTP
import SecureTransport

/// libsrtp2 (Debian's), driven the way camagent drove it before it had its own
/// SRTP: the reference its SRTP is checked against.
final class LibSRTPReference {
    enum Failure: Error, Equatable { case setup(Int), status(Int) }

    private let session: srtp_t
    private static let initialized: Bool = srtp_init() == srtp_err_status_ok

    init(profile: SRTPProfile, key: [UInt8], salt: [UInt8], outbound: Bool) throws {
        guard Self.initialized else { throw Failure.setup(-1) }
        var policy = srtp_policy_t()
        switch profile {
        case .aes128CMHMACSHA1_80:
            srtp_crypto_policy_set_rtp_default(&policy.rtp)
            srtp_crypto_policy_set_rtcp_default(&policy.rtcp)
        case .aeadAES128GCM:
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        }
        policy.ssrc.type = outbound ? ssrc_any_outbound : ssrc_any_inbound
        policy.window_size = 1024
        policy.allow_repeat_tx = 1
        var master = key + salt
        var created: srtp_t?
        let status = master.withUnsafeMutableBufferPointer { buffer in
            policy.key = buffer.baseAddress
            return srtp_create(&created, &policy)
        }
        guard status == srtp_err_status_ok, let created else { throw Failure.setup(Int(status.rawValue)) }
        session = created
    }

    deinit { srtp_dealloc(session) }

    func protectRTP(_ packet: [UInt8]) throws -> [UInt8] { try run(packet, grow: true, srtp_protect) }
    func unprotectRTP(_ packet: [UInt8]) throws -> [UInt8] { try run(packet, grow: false, srtp_unprotect) }
    func protectRTCP(_ packet: [UInt8]) throws -> [UInt8] { try run(packet, grow: true, srtp_protect_rtcp) }
    func unprotectRTCP(_ packet: [UInt8]) throws -> [UInt8] { try run(packet, grow: false, srtp_unprotect_rtcp) }

    private func run(_ packet: [UInt8], grow: Bool,
                     _ function: (srtp_t?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int32>?) -> srtp_err_status_t) throws -> [UInt8] {
        var buffer = packet + (grow ? [UInt8](repeating: 0, count: Int(CSRTP_MAX_TRAILER_LEN)) : [])
        var length = Int32(packet.count)
        let status = buffer.withUnsafeMutableBytes { function(session, $0.baseAddress, &length) }
        guard status == srtp_err_status_ok else { throw Failure.status(Int(status.rawValue)) }
        return Array(buffer[0..<Int(length)])
    }
}
