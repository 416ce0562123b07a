internal import COpenSSL

// The three primitives SRTP is made of (RFC 3711, RFC 7714), each keyed once
// when the session is made: nothing is allocated per packet.
//
// Both AES modes are built on one AES-128 block context (ECB) per key. A
// packet's key stream is its counter blocks encrypted in one
// EVP_EncryptUpdate. Setting a new IV on an EVP CTR or GCM context instead
// (as this file did until 2026-12-05) makes OpenSSL 3.0 look up cipher
// parameters by name for every packet (OSSL_PARAM, strcmp): in the router's
// profile that was most of SRTP's time, and the AES itself a small part.
// GCM's GHASH is OpenSSL's own (the public GCM128 API of <openssl/modes.h>,
// which picks its PCLMUL code), driven by the block context below.

/// AES-128 under one key, a block at a time (ECB, no padding), and the
/// counter-mode key stream made from it.
final class AESBlockCipher {
    let context: OpaquePointer

    init?(key: [UInt8]) {
        guard key.count == 16, let context = EVP_CIPHER_CTX_new() else { return nil }
        guard EVP_EncryptInit_ex(context, EVP_aes_128_ecb(), nil, key, nil) == 1,
              EVP_CIPHER_CTX_set_padding(context, 0) == 1 else {
            EVP_CIPHER_CTX_free(context)
            return nil
        }
        self.context = context
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// Counter blocks encrypted per EVP call: 512 bytes of scratch, on the stack.
    private static let chunkBlocks = 32

    /// XORs the key stream that starts at the 16-byte counter block `counter`
    /// (its last 32 bits counting up, big-endian, as GCM's and SRTP's
    /// counters do) into `count` bytes of `input`, written to `output` (which
    /// may be `input`). False if OpenSSL fails.
    static func applyKeyStream(context: OpaquePointer, counter: UnsafeRawPointer, input: UnsafeRawPointer,
                               output: UnsafeMutableRawPointer, count: Int) -> Bool {
        let prefix = counter.loadUnaligned(as: UInt64.self)
        let middle = counter.loadUnaligned(fromByteOffset: 8, as: UInt32.self)
        var low = UInt32(bigEndian: counter.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
        return withUnsafeTemporaryAllocation(byteCount: chunkBlocks * 16, alignment: 16) { scratch in
            let stream = scratch.baseAddress!
            var done = 0
            while done < count {
                let bytes = min(count - done, chunkBlocks * 16)
                let blocks = (bytes + 15) / 16
                for block in 0..<blocks {
                    stream.storeBytes(of: prefix, toByteOffset: block * 16, as: UInt64.self)
                    stream.storeBytes(of: middle, toByteOffset: block * 16 + 8, as: UInt32.self)
                    stream.storeBytes(of: low.bigEndian, toByteOffset: block * 16 + 12, as: UInt32.self)
                    low &+= 1
                }
                var written: Int32 = 0
                let bound = stream.assumingMemoryBound(to: UInt8.self)
                guard EVP_EncryptUpdate(context, bound, &written, bound, Int32(blocks * 16)) == 1 else { return false }
                var offset = 0
                while offset + 8 <= bytes {
                    let key = stream.load(fromByteOffset: offset, as: UInt64.self)
                    let text = input.loadUnaligned(fromByteOffset: done + offset, as: UInt64.self)
                    output.storeBytes(of: key ^ text, toByteOffset: done + offset, as: UInt64.self)
                    offset += 8
                }
                while offset < bytes {
                    let key = stream.load(fromByteOffset: offset, as: UInt8.self)
                    let text = input.load(fromByteOffset: done + offset, as: UInt8.self)
                    output.storeBytes(of: key ^ text, toByteOffset: done + offset, as: UInt8.self)
                    offset += 1
                }
                done += bytes
            }
            return true
        }
    }
}

/// AES-128 in counter mode (RFC 3711 §4.1.1): the key stream that starts at a
/// 16-byte IV, XORed into the bytes in place.
final class AESCounterMode {
    private let cipher: AESBlockCipher

    init?(key: [UInt8]) {
        guard let cipher = AESBlockCipher(key: key) else { return nil }
        self.cipher = cipher
    }

    func apply(iv: UnsafeRawBufferPointer, to bytes: UnsafeMutableRawBufferPointer) -> Bool {
        precondition(iv.count == 16, "AES-CM takes a 16-byte IV")
        guard let start = bytes.baseAddress, bytes.count > 0 else { return true }
        return AESBlockCipher.applyKeyStream(context: cipher.context, counter: iv.baseAddress!, input: start, output: start,
                                             count: bytes.count)
    }
}

/// AES-128-GCM (RFC 7714): seals or opens in place with a 12-byte IV, the
/// associated data authenticated but not encrypted, and a 16-byte tag.
final class AESGCM {
    static let tagLength = 16
    private let cipher: AESBlockCipher
    /// OpenSSL's GCM128_CONTEXT over `cipher`'s EVP context (its "key").
    private let gcm: OpaquePointer
    private let sealing: Bool

    init?(key: [UInt8], sealing: Bool) {
        guard let cipher = AESBlockCipher(key: key) else { return nil }
        // One block: GCM's hash key and each packet's tag mask. (An ECB update
        // of whole blocks under a valid key has no way to fail.)
        guard let gcm = CRYPTO_gcm128_new(UnsafeMutableRawPointer(cipher.context), { input, output, key in
            var written: Int32 = 0
            _ = EVP_EncryptUpdate(OpaquePointer(key), output, &written, input, 16)
        }) else { return nil }
        self.cipher = cipher
        self.gcm = gcm
        self.sealing = sealing
    }

    deinit { CRYPTO_gcm128_release(gcm) }

    /// Encrypts `text` in place and writes the tag to `tag`.
    func seal(iv: UnsafeRawBufferPointer, associated: UnsafeRawBufferPointer, _ moreAssociated: UnsafeRawBufferPointer = .empty,
              text: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawPointer) -> Bool {
        precondition(sealing)
        guard start(iv: iv, associated: associated, moreAssociated) else { return false }
        if let bytes = text.baseAddress?.assumingMemoryBound(to: UInt8.self), text.count > 0 {
            guard CRYPTO_gcm128_encrypt_ctr32(gcm, bytes, bytes, text.count, Self.keyStream) == 0 else { return false }
        }
        CRYPTO_gcm128_tag(gcm, tag.assumingMemoryBound(to: UInt8.self), Self.tagLength)
        return true
    }

    /// Decrypts `text` in place; false when the tag does not match (then `text` holds no plaintext to use).
    func open(iv: UnsafeRawBufferPointer, associated: UnsafeRawBufferPointer, _ moreAssociated: UnsafeRawBufferPointer = .empty,
              text: UnsafeMutableRawBufferPointer, tag: UnsafeRawPointer) -> Bool {
        precondition(!sealing)
        guard start(iv: iv, associated: associated, moreAssociated) else { return false }
        if let bytes = text.baseAddress?.assumingMemoryBound(to: UInt8.self), text.count > 0 {
            guard CRYPTO_gcm128_decrypt_ctr32(gcm, bytes, bytes, text.count, Self.keyStream) == 0 else { return false }
        }
        // Compared in constant time (CRYPTO_memcmp).
        return CRYPTO_gcm128_finish(gcm, tag.assumingMemoryBound(to: UInt8.self), Self.tagLength) == 0
    }

    private func start(iv: UnsafeRawBufferPointer, associated: UnsafeRawBufferPointer,
                       _ moreAssociated: UnsafeRawBufferPointer) -> Bool {
        precondition(iv.count == 12, "SRTP's GCM IV is 12 bytes")
        CRYPTO_gcm128_setiv(gcm, iv.baseAddress!.assumingMemoryBound(to: UInt8.self), 12)
        return add(associated) && add(moreAssociated)
    }

    private func add(_ associated: UnsafeRawBufferPointer) -> Bool {
        guard let bytes = associated.baseAddress, associated.count > 0 else { return true }
        return CRYPTO_gcm128_aad(gcm, bytes.assumingMemoryBound(to: UInt8.self), associated.count) == 0
    }

    /// GCM's counter blocks, whole blocks at a time (OpenSSL handles a last partial block with the block function).
    private static let keyStream: ctr128_f = { input, output, blocks, key, counter in
        _ = AESBlockCipher.applyKeyStream(context: OpaquePointer(key!), counter: counter!, input: input!, output: output!,
                                          count: blocks * 16)
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
