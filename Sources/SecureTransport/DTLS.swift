internal import COpenSSL
internal import OpenSSLSupport

public enum DTLSError: Error, Hashable, Sendable, CustomStringConvertible {
    case setupFailed(String)
    case handshakeFailed(String)
    case fingerprintMismatch(expected: String, got: String)
    case noSRTPProfile

    public var description: String {
        switch self {
        case .setupFailed(let r): "DTLS setup failed: \(r)"
        case .handshakeFailed(let r): "DTLS handshake failed: \(r)"
        case .fingerprintMismatch(let e, let g): "DTLS peer certificate fingerprint \(g) is not the \(e) the SDP announced: connection refused"
        case .noSRTPProfile: "DTLS peer agreed no SRTP protection profile"
        }
    }
}

/// A self-signed ECDSA P-256 certificate, as WebRTC uses (aiortc's DTLS
/// offers ECDSA suites only), and its SHA-256 fingerprint for the SDP.
public final class DTLSCertificate: @unchecked Sendable {
    let key: OpaquePointer
    let certificate: OpaquePointer
    /// "AB:CD:..." as it goes into a=fingerprint:sha-256.
    public let fingerprint: String

    public init(commonName: String = "camagent", validDays: Int = 30) throws(DTLSError) {
        guard let key = copenssl_generate_p256() else { throw .setupFailed("EC P-256 key: \(openSSLReason())") }
        guard let x509 = X509_new() else {
            EVP_PKEY_free(key)
            throw .setupFailed("X509_new")
        }
        var serial = [UInt8](repeating: 0, count: 8)
        _ = RAND_bytes(&serial, 8)
        X509_set_version(x509, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(x509), Int(serial.withUnsafeBytes { $0.load(as: UInt32.self) } >> 1))
        X509_gmtime_adj(X509_getm_notBefore(x509), -86_400)
        X509_gmtime_adj(X509_getm_notAfter(x509), validDays * 86_400)
        X509_set_pubkey(x509, key)
        let name = X509_get_subject_name(x509)
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0)
        X509_set_issuer_name(x509, name)
        guard X509_sign(x509, key, EVP_sha256()) > 0 else {
            X509_free(x509)
            EVP_PKEY_free(key)
            throw .setupFailed("signing the certificate: \(openSSLReason())")
        }
        self.key = key
        certificate = x509
        fingerprint = Self.sha256Fingerprint(x509)
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
    }

    static func sha256Fingerprint(_ x509: OpaquePointer) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        X509_digest(x509, EVP_sha256(), &digest, &length)
        return digest.prefix(Int(length)).map { byte in
            let hex = String(byte, radix: 16, uppercase: true)
            return hex.count == 1 ? "0" + hex : hex
        }.joined(separator: ":")
    }
}

/// One DTLS 1.2 association with use_srtp, driven by datagrams: the caller
/// feeds what arrives and sends what `outgoing` hands back, over ICE's chosen
/// pair. OpenSSL works on memory BIOs, so no socket is touched here. The peer
/// must present the certificate whose fingerprint the SDP announced; anything
/// else ends the handshake with `fingerprintMismatch`.
public final class DTLSTransport: @unchecked Sendable {
    public enum Role: Sendable { case client, server }
    public enum State: Sendable, Equatable { case handshaking, connected, failed }

    public let role: Role
    public private(set) var state = State.handshaking
    /// After `connected`: the profile agreed and the keys for each direction.
    public private(set) var srtpProfile: SRTPProfile?
    public private(set) var srtpKeys: SRTPKeys?

    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private let incoming: OpaquePointer   // BIO we write received datagrams into
    private let outgoingBIO: OpaquePointer   // BIO OpenSSL writes datagrams to send into
    private let expectedFingerprint: String
    /// Largest datagram sent: a handshake flight stays under a path MTU.
    public static let mtu = 1200

    public init(certificate: DTLSCertificate, role: Role, remoteFingerprint: String,
                profiles: [SRTPProfile] = [.aeadAES128GCM, .aes128CMHMACSHA1_80]) throws(DTLSError) {
        self.role = role
        expectedFingerprint = remoteFingerprint.uppercased()
        guard let context = SSL_CTX_new(DTLS_method()) else { throw .setupFailed("SSL_CTX_new: \(openSSLReason())") }
        self.context = context
        _ = copenssl_ctx_require_dtls12(context)
        guard SSL_CTX_use_certificate(context, certificate.certificate) == 1,
              SSL_CTX_use_PrivateKey(context, certificate.key) == 1 else {
            SSL_CTX_free(context)
            throw .setupFailed("certificate: \(openSSLReason())")
        }
        // Both sides present self-signed certificates; trust comes from the
        // fingerprint in the SDP, checked once the handshake is done.
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT) { _, _ in 1 }
        SSL_CTX_set_cipher_list(context, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305")
        // Note the inverted convention: 0 is success here.
        guard SSL_CTX_set_tlsext_use_srtp(context, profiles.map(\.openSSLName).joined(separator: ":")) == 0 else {
            SSL_CTX_free(context)
            throw .setupFailed("use_srtp: \(openSSLReason())")
        }
        guard let ssl = SSL_new(context), let incoming = BIO_new(BIO_s_mem()), let outgoing = BIO_new(BIO_s_mem()) else {
            SSL_CTX_free(context)
            throw .setupFailed("SSL_new: \(openSSLReason())")
        }
        self.ssl = ssl
        self.incoming = incoming
        outgoingBIO = outgoing
        SSL_set_bio(ssl, incoming, outgoing)   // the SSL owns both BIOs from here
        copenssl_no_query_mtu(ssl)
        _ = copenssl_set_link_mtu(ssl, Self.mtu)
        if role == .client { SSL_set_connect_state(ssl) } else { SSL_set_accept_state(ssl) }
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    /// Starts the handshake (the client's first flight); the server waits.
    public func start() throws(DTLSError) -> [[UInt8]] {
        try advance()
        return drain()
    }

    /// Feeds one received DTLS datagram; returns the datagrams to send back.
    /// After the handshake too: when our last flight was lost, the peer sends
    /// its own again, and OpenSSL answers with ours (RFC 6347 4.2.4).
    public func receive(_ datagram: [UInt8]) throws(DTLSError) -> [[UInt8]] {
        _ = datagram.withUnsafeBytes { BIO_write(incoming, $0.baseAddress, Int32($0.count)) }
        switch state {
        case .handshaking: try advance()
        case .connected: readAfterHandshake()
        case .failed: break
        }
        return drain()
    }

    /// OpenSSL acts on records that come after the handshake only inside
    /// SSL_read: a retransmitted Finished makes it resend our last flight.
    /// WebRTC media travels as SRTP, so application data here (there is none
    /// without data channels) is discarded, and so is a record it rejects.
    private func readAfterHandshake() {
        var scratch = [UInt8](repeating: 0, count: 2048)   // only on a peer's retransmission: rare
        ERR_clear_error()
        while SSL_read(ssl, &scratch, Int32(scratch.count)) > 0 {}
        ERR_clear_error()
    }

    /// Seconds until OpenSSL wants `retransmit()` called, nil when it does not.
    public var retransmitDelay: Double? {
        var tv = timeval()
        guard copenssl_dtls_get_timeout(ssl, &tv) == 1 else { return nil }
        return Double(tv.tv_sec) + Double(tv.tv_usec) / 1e6
    }

    /// Resends the last flight when its timer ran out (lost datagrams).
    public func retransmit() -> [[UInt8]] {
        _ = copenssl_dtls_handle_timeout(ssl)
        return drain()
    }

    private func advance() throws(DTLSError) {
        guard state == .handshaking else { return }
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            try finishHandshake()
            return
        }
        let error = SSL_get_error(ssl, result)
        guard error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE else {
            state = .failed
            throw .handshakeFailed(openSSLReason())
        }
    }

    private func finishHandshake() throws(DTLSError) {
        guard let peer = SSL_get1_peer_certificate(ssl) else {
            state = .failed
            throw .handshakeFailed("the peer sent no certificate")
        }
        let got = DTLSCertificate.sha256Fingerprint(peer)
        X509_free(peer)
        guard got == expectedFingerprint else {
            state = .failed
            throw .fingerprintMismatch(expected: expectedFingerprint, got: got)
        }
        guard let selected = SSL_get_selected_srtp_profile(ssl),
              let profile = SRTPProfile(rawValue: UInt16(selected.pointee.id)) else {
            state = .failed
            throw .noSRTPProfile
        }
        var material = [UInt8](repeating: 0, count: SRTPKeys.exportLength(profile))
        let label = "EXTRACTOR-dtls_srtp"
        guard SSL_export_keying_material(ssl, &material, material.count, label, label.utf8.count, nil, 0, 0) == 1 else {
            state = .failed
            throw .handshakeFailed("exporting SRTP keys: \(openSSLReason())")
        }
        srtpProfile = profile
        srtpKeys = SRTPKeys(exported: material, profile: profile, isClient: role == .client)
        state = .connected
    }

    /// What OpenSSL wrote to send. A memory BIO keeps no datagram borders,
    /// so the pending bytes are cut at record boundaries into datagrams of at
    /// most one MTU (several DTLS records in one datagram are allowed).
    private func drain() -> [[UInt8]] {
        let pending = Int(copenssl_pending(outgoingBIO))
        guard pending > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: pending)
        let read = bytes.withUnsafeMutableBytes { BIO_read(outgoingBIO, $0.baseAddress, Int32(pending)) }
        guard read > 0 else { return [] }
        var datagrams: [[UInt8]] = []
        var current: [UInt8] = []
        var i = 0
        while i + 13 <= Int(read) {
            // DTLS record header: type, version (2), epoch (2), sequence (6), length (2).
            let length = Int(bytes[i + 11]) << 8 | Int(bytes[i + 12])
            let record = bytes[i..<min(i + 13 + length, Int(read))]
            if !current.isEmpty && current.count + record.count > Self.mtu {
                datagrams.append(current)
                current = []
            }
            current += record
            i += 13 + length
        }
        if !current.isEmpty { datagrams.append(current) }
        return datagrams
    }
}
