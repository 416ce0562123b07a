internal import COpenSSL
internal import OpenSSLSupport

/// TLS (1.2 or newer) over a TCPConnection. OpenSSL works on memory BIOs and
/// this class moves the bytes, so every socket wait has the deadline and no
/// write can raise SIGPIPE. The server's certificate is checked against the
/// system's CAs (and an optional extra PEM file) and the host name or IP
/// address in the URL, unless verification is switched off.
final class TLSConnection: ByteStream {
    private let tcp: TCPConnection
    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private let incoming: OpaquePointer  // network -> OpenSSL
    private let outgoing: OpaquePointer  // OpenSSL -> network
    private var tcpAtEnd = false
    private var host: String { tcp.host }

    init(over tcp: TCPConnection, verify: Bool, extraTrustFile: String?, deadline: Deadline) throws(WHIPError) {
        let host = tcp.host
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw .tls(host: host, reason: "SSL_CTX_new: \(openSSLReason())")
        }
        let ssl = SSL_new(context), incoming = BIO_new(BIO_s_mem()), outgoing = BIO_new(BIO_s_mem())
        guard let ssl, let incoming, let outgoing else {
            let reason = openSSLReason()
            SSL_free(ssl)
            BIO_free(incoming)
            BIO_free(outgoing)
            SSL_CTX_free(context)
            throw .tls(host: host, reason: "SSL_new: \(reason)")
        }
        // The SSL owns both BIOs from here; freeing it frees them.
        SSL_set_bio(ssl, incoming, outgoing)
        self.tcp = tcp
        self.context = context
        self.ssl = ssl
        self.incoming = incoming
        self.outgoing = outgoing

        _ = copenssl_ctx_require_tls12(context)
        let isAddress = Self.isIPAddress(host)
        if verify {
            guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                throw .tls(host: host, reason: "cannot load the system CA certificates: \(openSSLReason())")
            }
            if let extraTrustFile {
                guard SSL_CTX_load_verify_locations(context, extraTrustFile, nil) == 1 else {
                    throw .tls(host: host, reason: "cannot load CA certificates from \(extraTrustFile): \(openSSLReason())")
                }
            }
            SSL_set_verify(ssl, SSL_VERIFY_PEER, nil)
            let nameSet = isAddress
                ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
                : SSL_set1_host(ssl, host)
            guard nameSet == 1 else {
                throw .tls(host: host, reason: "cannot check the certificate against \"\(host)\": \(openSSLReason())")
            }
        } else {
            SSL_set_verify(ssl, SSL_VERIFY_NONE, nil)
        }
        // SNI carries names only (RFC 6066), never addresses.
        if !isAddress { _ = copenssl_set_sni(ssl, host) }
        SSL_set_connect_state(ssl)
        try handshake(deadline: deadline)
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    func close() {
        tcp.close()
    }

    private func handshake(deadline: Deadline) throws(WHIPError) {
        let during = "TLS handshake"
        while true {
            ERR_clear_error()
            let result = SSL_do_handshake(ssl)
            try flush(deadline: deadline, during: during)
            if result == 1 { return }
            switch SSL_get_error(ssl, result) {
            case SSL_ERROR_WANT_READ:
                guard try fill(deadline: deadline, during: during) else {
                    throw .tls(host: host, reason: "the server closed the connection during the handshake")
                }
            case SSL_ERROR_WANT_WRITE:
                continue
            default:
                let verifyResult = SSL_get_verify_result(ssl)
                if verifyResult != Int(X509_V_OK) {
                    let why = String(cString: X509_verify_cert_error_string(verifyResult))
                    throw .tls(host: host, reason: "certificate not trusted: \(why)")
                }
                throw .tls(host: host, reason: "handshake failed: \(openSSLReason())")
            }
        }
    }

    /// Sends whatever OpenSSL has written into the outgoing BIO.
    private func flush(deadline: Deadline, during: String) throws(WHIPError) {
        while copenssl_pending(outgoing) > 0 {
            var chunk = [UInt8](repeating: 0, count: 16_384)
            let n = BIO_read(outgoing, &chunk, Int32(chunk.count))
            guard n > 0 else { return }
            chunk.removeLast(chunk.count - Int(n))
            try tcp.write(chunk, deadline: deadline, during: during)
        }
    }

    /// Feeds one read from the socket to OpenSSL; false at the end of the stream.
    private func fill(deadline: Deadline, during: String) throws(WHIPError) -> Bool {
        guard !tcpAtEnd else { return false }
        let bytes = try tcp.read(maxCount: 16_384, deadline: deadline, during: during)
        guard !bytes.isEmpty else {
            tcpAtEnd = true
            return false
        }
        _ = BIO_write(incoming, bytes, Int32(bytes.count))
        return true
    }

    func write(_ bytes: [UInt8], deadline: Deadline) throws(WHIPError) {
        guard !bytes.isEmpty else { return }
        ERR_clear_error()
        // Memory BIOs grow as needed, so one SSL_write takes it all.
        let n = SSL_write(ssl, bytes, Int32(bytes.count))
        guard n > 0 else {
            throw .tls(host: host, reason: "SSL_write: \(openSSLReason())")
        }
        try flush(deadline: deadline, during: "sending the request")
    }

    func read(maxCount: Int, deadline: Deadline) throws(WHIPError) -> [UInt8] {
        let during = "waiting for the response"
        var buffer = [UInt8](repeating: 0, count: maxCount)
        while true {
            ERR_clear_error()
            let n = SSL_read(ssl, &buffer, Int32(buffer.count))
            if n > 0 {
                buffer.removeLast(buffer.count - Int(n))
                return buffer
            }
            switch SSL_get_error(ssl, n) {
            case SSL_ERROR_ZERO_RETURN:
                return []
            case SSL_ERROR_WANT_READ:
                try flush(deadline: deadline, during: during)
                // A close without close_notify ends the stream too: HTTP
                // frames its own messages, and Connection: close servers often
                // just close the socket.
                guard try fill(deadline: deadline, during: during) else { return [] }
            case SSL_ERROR_WANT_WRITE:
                try flush(deadline: deadline, during: during)
            default:
                throw .tls(host: host, reason: "reading: \(openSSLReason())")
            }
        }
    }

    static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || (!host.isEmpty && host.allSatisfy { $0.isNumber || $0 == "." })
    }
}
