import Crypto
import FoundationEssentials
import HummingbirdCore
import HummingbirdTLS
import NIOSSL
import SessionServer
import SwiftASN1
import X509

#if canImport(Glibc)
import Glibc
#endif

/// What the router serves HTTPS with: a certificate chain and its private key
/// (PEM), checked when loaded, plus the two digests people and browsers pin.
/// Browsers let a page use the camera and microphone only on a secure origin,
/// so a session page served to another machine needs this. Give it to the
/// router as `SessionServerConfiguration.transportSecurity`.
public struct RouterTLSIdentity: RouterTransportSecurity, Equatable {
    public let certificateChainPEM: String
    public let privateKeyPEM: String
    /// SHA-256 of the leaf certificate (DER), as browsers show it: "AB:CD:…".
    public let fingerprint: String
    /// SHA-256 of the leaf's SubjectPublicKeyInfo, base64: what Chromium's
    /// `--ignore-certificate-errors-spki-list` and HPKP-style pins take.
    public let publicKeyPin: String

    /// Reads a certificate chain (leaf first) and its key from PEM files.
    public static func load(certificateFile: String, keyFile: String) throws(RouterTLSError) -> RouterTLSIdentity {
        let chain = try readText(certificateFile, what: "certificate")
        let key = try readText(keyFile, what: "private key")
        return try RouterTLSIdentity(certificateChainPEM: chain, privateKeyPEM: key,
                                     describedAs: "\(certificateFile) and \(keyFile)")
    }

    /// The router's own self-signed certificate in `directory` (router-tls.crt
    /// and router-tls.key, the key mode 0600): loaded when both exist, made on
    /// the first start otherwise. It names `hostNames` (DNS names or IP
    /// addresses) besides localhost, 127.0.0.1 and ::1. `created` says which.
    public static func selfSigned(in directory: String, hostNames: [String])
        throws(RouterTLSError) -> (identity: RouterTLSIdentity, certificateFile: String, created: Bool)
    {
        let certificateFile = directory + "/router-tls.crt"
        let keyFile = directory + "/router-tls.key"
        let haveCertificate = access(certificateFile, F_OK) == 0
        let haveKey = access(keyFile, F_OK) == 0
        if haveCertificate && haveKey {
            return (try load(certificateFile: certificateFile, keyFile: keyFile), certificateFile, false)
        }
        // One without the other is someone's file: never overwrite it.
        if haveCertificate || haveKey {
            throw .incomplete(present: haveCertificate ? certificateFile : keyFile,
                              missing: haveCertificate ? keyFile : certificateFile)
        }
        let made = try makeSelfSigned(hostNames: hostNames)
        try write(made.privateKeyPEM, to: keyFile, mode: 0o600)
        try write(made.certificateChainPEM, to: certificateFile, mode: 0o644)
        return (made, certificateFile, true)
    }

    init(certificateChainPEM: String, privateKeyPEM: String, describedAs source: String) throws(RouterTLSError) {
        let leaf: Certificate
        do {
            let documents = try PEMDocument.parseMultiple(pemString: certificateChainPEM)
            guard let first = documents.first(where: { $0.discriminator == "CERTIFICATE" }) else {
                throw RouterTLSError.unusable(source, reason: "no CERTIFICATE block")
            }
            leaf = try Certificate(pemDocument: first)
            // NIOSSL is what serves it: make sure it takes both now, not at the first connection.
            _ = try NIOSSLContext(configuration: Self.serverConfiguration(certificateChainPEM: certificateChainPEM,
                                                                         privateKeyPEM: privateKeyPEM))
            // NIOSSL does not check that the key is the certificate's (a handshake would fail):
            // compare the public keys, for every key type swift-certificates reads.
            let keyBlock = try PEMDocument.parseMultiple(pemString: privateKeyPEM)
                .first { $0.discriminator.hasSuffix("PRIVATE KEY") }
            if let keyBlock, let key = try? Certificate.PrivateKey(pemDocument: keyBlock), key.publicKey != leaf.publicKey {
                throw RouterTLSError.unusable(source, reason: "the key is not the certificate's (their public keys differ)")
            }
        } catch let error as RouterTLSError {
            throw error
        } catch {
            throw .unusable(source, reason: "\(error)")
        }
        do {
            var serializer = DER.Serializer()
            try serializer.serialize(leaf)
            fingerprint = SHA256.hash(data: serializer.serializedBytes)
                .map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true) }
                .joined(separator: ":")
            let subjectPublicKeyInfo = try leaf.publicKey.serializeAsPEM().derBytes
            publicKeyPin = Data(SHA256.hash(data: subjectPublicKeyInfo)).base64EncodedString()
        } catch {
            throw .unusable(source, reason: "\(error)")
        }
        self.certificateChainPEM = certificateChainPEM
        self.privateKeyPEM = privateKeyPEM
    }

    /// NIOSSL's server configuration for this chain and key.
    static func serverConfiguration(certificateChainPEM: String, privateKeyPEM: String) throws -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(certificateChainPEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(privateKeyPEM.utf8), format: .pem)))
    }

    var serverConfiguration: TLSConfiguration {
        get throws { try Self.serverConfiguration(certificateChainPEM: certificateChainPEM, privateKeyPEM: privateKeyPEM) }
    }

    /// Each connection does the TLS handshake (NIOSSL) before its HTTP.
    public func secure<Channel: ServerChildChannel>(_ channel: Channel) throws -> any ServerChildChannel {
        try TLSChannel(channel, tlsConfiguration: serverConfiguration)
    }

    /// An ECDSA P-256 key and a certificate it signs itself, valid from an
    /// hour ago for 825 days (what browsers accept for a server certificate),
    /// for TLS servers only.
    static func makeSelfSigned(hostNames: [String]) throws(RouterTLSError) -> RouterTLSIdentity {
        do {
            let key = Certificate.PrivateKey(P256.Signing.PrivateKey())
            let name = try DistinguishedName { CommonName("camagent router") }
            var names: [GeneralName] = []
            for host in ["localhost", "127.0.0.1", "::1"] + hostNames where !host.isEmpty {
                let entry = generalName(host)
                if !names.contains(entry) { names.append(entry) }
            }
            let now = Date()
            let certificate = try Certificate(
                version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: key.publicKey,
                notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(825 * 86_400),
                issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                    try ExtendedKeyUsage([.serverAuth])
                    SubjectAlternativeNames(names)
                },
                issuerPrivateKey: key)
            return try RouterTLSIdentity(certificateChainPEM: try certificate.serializeAsPEM().pemString + "\n",
                                         privateKeyPEM: try key.serializeAsPEM().pemString + "\n",
                                         describedAs: "the new self-signed certificate")
        } catch let error as RouterTLSError {
            throw error
        } catch {
            throw .cannotCreate(reason: "\(error)")
        }
    }

    /// An IP address as an iPAddress name (its 4 or 16 bytes), anything else as a DNS name.
    private static func generalName(_ host: String) -> GeneralName {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return .ipAddress(ASN1OctetString(contentBytes: withUnsafeBytes(of: &v4) { ArraySlice($0) }))
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            return .ipAddress(ASN1OctetString(contentBytes: withUnsafeBytes(of: &v6) { ArraySlice($0) }))
        }
        return .dnsName(host)
    }

    private static func readText(_ path: String, what: String) throws(RouterTLSError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadable(path, what: what, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw .unreadable(path, what: what, reason: String(cString: strerror(errno))) }
            if n == 0 { break }
            bytes += chunk[0..<n]
            guard bytes.count <= 1 << 20 else { throw .unreadable(path, what: what, reason: "larger than 1 MiB") }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func write(_ text: String, to path: String, mode: mode_t) throws(RouterTLSError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw .cannotWrite(path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw .cannotWrite(path, reason: String(cString: strerror(errno))) }
            written += n
        }
        guard fsync(fd) == 0 else { throw .cannotWrite(path, reason: String(cString: strerror(errno))) }
    }
}

/// Why the router cannot serve HTTPS.
public enum RouterTLSError: Error, Equatable, CustomStringConvertible {
    case unreadable(String, what: String, reason: String)
    case unusable(String, reason: String)
    case incomplete(present: String, missing: String)
    case cannotCreate(reason: String)
    case cannotWrite(String, reason: String)

    public var description: String {
        switch self {
        case let .unreadable(path, what, reason): "cannot read the TLS \(what) \(path): \(reason)"
        case let .unusable(source, reason): "cannot use \(source) for TLS: \(reason)"
        case let .incomplete(present, missing):
            "\(present) exists but \(missing) does not: remove the first to have both made again, or add the second"
        case let .cannotCreate(reason): "cannot make a self-signed certificate: \(reason)"
        case let .cannotWrite(path, reason): "cannot write \(path): \(reason)"
        }
    }
}
