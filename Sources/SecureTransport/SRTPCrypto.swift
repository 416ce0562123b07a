internal import COpenSSL

// The three primitives SRTP is made of (RFC 3711, RFC 7714), each keyed once
// when the session is made so that a packet only sets its IV: OpenSSL's EVP
// contexts are reused and nothing is allocated per packet.

/// AES-128 in counter mode (RFC 3711 §4.1.1): the key stream that starts at a
/// 16-byte IV, XORed into the bytes in place.
final class AESCounterMode {
    private let context: OpaquePointer

    init?(key: [UInt8]) {
        guard key.count == 16, let context = EVP_CIPHER_CTX_new() else { return nil }
        guard EVP_EncryptInit_ex(context, EVP_aes_128_ctr(), nil, key, nil) == 1 else {
            EVP_CIPHER_CTX_free(context)
            return nil
        }
        self.context = context
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    func apply(iv: UnsafeRawBufferPointer, to bytes: UnsafeMutableRawBufferPointer) -> Bool {
        guard EVP_EncryptInit_ex(context, nil, nil, nil, iv.baseAddress?.assumingMemoryBound(to: UInt8.self)) == 1 else {
            return false
        }
        guard let start = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count > 0 else { return true }
        var written: Int32 = 0
        return EVP_EncryptUpdate(context, start, &written, start, Int32(bytes.count)) == 1
    }
}

/// AES-128-GCM (RFC 7714): seals or opens in place with a 12-byte IV, the
/// associated data authenticated but not encrypted, and a 16-byte tag.
final class AESGCM {
    static let tagLength = 16
    private let context: OpaquePointer
    private let sealing: Bool

    init?(key: [UInt8], sealing: Bool) {
        guard key.count == 16, let context = EVP_CIPHER_CTX_new() else { return nil }
        guard EVP_CipherInit_ex(context, EVP_aes_128_gcm(), nil, key, nil, sealing ? 1 : 0) == 1 else {
            EVP_CIPHER_CTX_free(context)
            return nil
        }
        self.context = context
        self.sealing = sealing
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// Encrypts `text` in place and writes the tag to `tag`.
    func seal(iv: UnsafeRawBufferPointer, associated: UnsafeRawBufferPointer, _ moreAssociated: UnsafeRawBufferPointer = .empty,
              text: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawPointer) -> Bool {
        precondition(sealing)
        guard run(iv: iv, associated: associated, moreAssociated, text: text) else { return false }
        var written: Int32 = 0
        var scratch: UInt8 = 0
        guard EVP_CipherFinal_ex(context, &scratch, &written) == 1 else { return false }
        return copenssl_gcm_get_tag(context, tag, Int32(Self.tagLength)) == 1
    }

    /// Decrypts `text` in place; false when the tag does not match (then `text` holds no plaintext to use).
    func open(iv: UnsafeRawBufferPointer, associated: UnsafeRawBufferPointer, _ moreAssociated: UnsafeRawBufferPointer = .empty,
              text: UnsafeMutableRawBufferPointer, tag: UnsafeRawPointer) -> Bool {
        precondition(!sealing)
        guard run(iv: iv, associated: associated, moreAssociated, text: text),
              copenssl_gcm_set_tag(context, UnsafeMutableRawPointer(mutating: tag), Int32(Self.tagLength)) == 1 else {
            return false
        }
        var written: Int32 = 0
        var scratch: UInt8 = 0
        return EVP_CipherFinal_ex(context, &scratch, &written) == 1
    }

    private func addAssociated(_ part: UnsafeRawBufferPointer) -> Bool {
        var written: Int32 = 0
        return EVP_CipherUpdate(context, nil, &written, part.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                Int32(part.count)) == 1
    }

    private func run(iv: UnsafeRawBufferPointer, associated: UnsafeRawBufferPointer, _ moreAssociated: UnsafeRawBufferPointer,
                     text: UnsafeMutableRawBufferPointer) -> Bool {
        guard EVP_CipherInit_ex(context, nil, nil, nil, iv.baseAddress?.assumingMemoryBound(to: UInt8.self), -1) == 1 else {
            return false
        }
        var written: Int32 = 0
        if associated.count > 0, !addAssociated(associated) { return false }
        if moreAssociated.count > 0, !addAssociated(moreAssociated) { return false }
        guard let start = text.baseAddress?.assumingMemoryBound(to: UInt8.self), text.count > 0 else { return true }
        return EVP_CipherUpdate(context, start, &written, start, Int32(text.count)) == 1
    }
}

/// HMAC-SHA1 (RFC 2104) with its key's inner and outer states computed once:
/// each message starts from copies of them.
struct HMACSHA1 {
    static let length = 20
    private var inner = SHA_CTX(), outer = SHA_CTX()

    init(key: [UInt8]) {
        precondition(key.count <= 64, "SRTP's authentication keys are 20 bytes")
        let padded = key + [UInt8](repeating: 0, count: 64 - key.count)
        let innerPad = padded.map { $0 ^ 0x36 }, outerPad = padded.map { $0 ^ 0x5c }
        copenssl_sha1_init(&inner)
        copenssl_sha1_update(&inner, innerPad, 64)
        copenssl_sha1_init(&outer)
        copenssl_sha1_update(&outer, outerPad, 64)
    }

    /// The MAC of `message` followed by `suffix`, into `digest` (20 bytes).
    func authenticate(_ message: UnsafeRawBufferPointer, _ suffix: UnsafeRawBufferPointer,
                      into digest: UnsafeMutablePointer<UInt8>) {
        var state = inner
        if message.count > 0 { copenssl_sha1_update(&state, message.baseAddress, message.count) }
        if suffix.count > 0 { copenssl_sha1_update(&state, suffix.baseAddress, suffix.count) }
        copenssl_sha1_final(&state, digest)
        state = outer
        copenssl_sha1_update(&state, digest, Self.length)
        copenssl_sha1_final(&state, digest)
    }
}

extension UnsafeRawBufferPointer {
    static var empty: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }
}

/// Compares two byte ranges in time that does not depend on where they differ.
func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    a.count == b.count && CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
}

/// The SRTP key derivation (RFC 3711 §4.3.1, key derivation rate 0): AES-CM
/// under the master key, from an IV made of the master salt with the label
/// XORed into its eighth byte. RFC 7714's 12-byte salts are padded with zeros
/// to the 14 bytes the function takes.
enum SRTPKeyDerivation {
    enum Label: UInt8 {
        case rtpEncryption = 0, rtpAuthentication = 1, rtpSalt = 2
        case rtcpEncryption = 3, rtcpAuthentication = 4, rtcpSalt = 5
    }

    static func derive(masterKey: [UInt8], masterSalt: [UInt8], label: Label, length: Int) -> [UInt8]? {
        guard let cipher = AESCounterMode(key: masterKey), masterSalt.count <= 14 else { return nil }
        var iv = [UInt8](repeating: 0, count: 16)
        iv.replaceSubrange(0..<masterSalt.count, with: masterSalt)
        iv[7] ^= label.rawValue
        var output = [UInt8](repeating: 0, count: length)
        let ok = iv.withUnsafeBytes { iv in output.withUnsafeMutableBytes { cipher.apply(iv: iv, to: $0) } }
        return ok ? output : nil
    }
}
