import ICE
import Testing

@Suite("STUN messages (RFC 8489, test vectors of RFC 5769)")
struct STUNTests {
    /// RFC 5769 §2.1, the sample request: SOFTWARE, PRIORITY, ICE-CONTROLLED,
    /// USERNAME "evtj:h6vY" (padded with spaces), MESSAGE-INTEGRITY, FINGERPRINT.
    static let sampleRequest: [UInt8] = hex("""
        00010058 2112a442 b7e7a701 bc34d686 fa87dfae 80220010 5354554e 20746573 7420636c 69656e74
        00240004 6e0001ff 80290008 932ff9b1 51263b36 00060009 6576746a 3a683676 59202020
        00080014 9aeaa70c bfd8cb56 781ef2b5 b2d3f249 c1b571a2 80280004 e57a3bcf
        """)
    static let password = Array("VOkJxbRl1RmTxUk/WvJxBt".utf8)
    static let transactionID = Array(sampleRequest[8..<20])

    static func hex(_ text: String) -> [UInt8] {
        let digits = text.filter(\.isHexDigit)
        return stride(from: 0, to: digits.count, by: 2).map {
            let start = digits.index(digits.startIndex, offsetBy: $0)
            return UInt8(digits[start..<digits.index(start, offsetBy: 2)], radix: 16)!
        }
    }

    /// The sample request with USE-CANDIDATE and a PRIORITY appended after MESSAGE-INTEGRITY
    /// (its FINGERPRINT dropped): an on-path attacker replaying a captured check from its own
    /// address could have had a lite agent select it. Both are ignored; the HMAC still holds.
    @Test func attributesAfterMessageIntegrityAreIgnored() throws {
        var bytes = Array(Self.sampleRequest.dropLast(8))   // without FINGERPRINT
        bytes += [0x00, 0x25, 0x00, 0x00]                              // USE-CANDIDATE
        bytes += [0x00, 0x24, 0x00, 0x04, 0x7f, 0xff, 0xff, 0xff]      // PRIORITY
        let length = bytes.count - 20
        bytes[2] = UInt8(length >> 8)
        bytes[3] = UInt8(length & 0xff)
        let message = try STUNMessage(parsing: bytes, integrityKey: Self.password)
        #expect(!message.attributes.contains(.useCandidate))
        #expect(message.attributes.filter { if case .priority = $0 { true } else { false } } == [.priority(0x6e00_01ff)])
        #expect(try STUNMessage(parsing: bytes).attributes == message.attributes)
    }

    @Test func sampleRequestParsesAndAuthenticates() throws {
        let message = try STUNMessage(parsing: Self.sampleRequest, integrityKey: Self.password)
        #expect(message.messageClass == .request && message.method == STUNMessage.bindingMethod)
        #expect(message.transactionID == Self.transactionID)
        #expect(message.attributes == [
            .software("STUN test client"), .priority(0x6e00_01ff),
            .iceControlled(tieBreaker: 0x932f_f9b1_5126_3b36), .username("evtj:h6vY"),
        ])
    }

    @Test func wrongPasswordAndDamageAreRefused() {
        #expect(throws: STUNError.integrityMismatch) {
            try STUNMessage(parsing: Self.sampleRequest, integrityKey: Array("not the password".utf8))
        }
        var damaged = Self.sampleRequest
        damaged[damaged.count - 1] ^= 0x01
        #expect(throws: STUNError.fingerprintMismatch) { try STUNMessage(parsing: damaged) }
        #expect(throws: STUNError.notSTUN) { try STUNMessage(parsing: Array(Self.sampleRequest.dropFirst(4))) }
        #expect(throws: STUNError.truncated) { try STUNMessage(parsing: Array(Self.sampleRequest.dropLast(8))) }
    }

    @Test func encodingMatchesTheSampleUpToPadding() throws {
        let message = STUNMessage(.request, transactionID: Self.transactionID, attributes: [
            .software("STUN test client"), .priority(0x6e00_01ff),
            .iceControlled(tieBreaker: 0x932f_f9b1_5126_3b36), .username("evtj:h6vY"),
        ])
        let bytes = message.encoded(integrityKey: Self.password)
        #expect(bytes.count == Self.sampleRequest.count)
        // Identical through the username; the sample pads it with spaces, we pad with zeros
        // (RFC 8489 lets the sender choose), so the HMAC and CRC that cover the padding differ.
        #expect(Array(bytes[0..<(bytes.count - 36)]) == Array(Self.sampleRequest[0..<(bytes.count - 36)]))
        #expect(try STUNMessage(parsing: bytes, integrityKey: Self.password) == message)
    }

    @Test func xorMappedAddressAsInTheSampleResponse() throws {
        // RFC 5769 §2.2: 192.0.2.1 port 32853 is carried as a1 47 e1 12 a6 43.
        let address = STUNAddress(address: [192, 0, 2, 1], port: 32853)
        let response = STUNMessage(.success, transactionID: Self.transactionID,
                                   attributes: [.xorMappedAddress(address)])
        let bytes = response.encoded(integrityKey: Self.password)
        #expect(Array(bytes[20..<32]) == [0x00, 0x20, 0x00, 0x08, 0x00, 0x01, 0xa1, 0x47, 0xe1, 0x12, 0xa6, 0x43])
        let parsed = try STUNMessage(parsing: bytes, integrityKey: Self.password)
        #expect(parsed.messageClass == .success && parsed.attributes == [.xorMappedAddress(address)])
        #expect(address.description == "192.0.2.1:32853")
    }

    @Test func ipv6AddressesAndErrorsRoundTrip() throws {
        let v6 = STUNAddress(address: [0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34, 0x56, 0x78, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77],
                             port: 32853)
        let message = STUNMessage(.error, transactionID: STUNMessage.randomTransactionID(),
                                  attributes: [.xorMappedAddress(v6), .errorCode(code: 487, reason: "Role Conflict"),
                                               .useCandidate, .iceControlling(tieBreaker: 1)])
        #expect(try STUNMessage(parsing: message.encoded()) == message)
        #expect(v6.description == "[2001:db8:1234:5678:11:2233:4455:6677]:32853")
    }

    @Test func integrityIsRequiredWhenAKeyIsGiven() {
        let unsigned = STUNMessage(.request, transactionID: Self.transactionID).encoded()
        #expect(throws: STUNError.integrityMissing) { try STUNMessage(parsing: unsigned, integrityKey: Self.password) }
        #expect(STUNMessage.looksLikeSTUN(unsigned[...]))
        #expect(!STUNMessage.looksLikeSTUN([0x80, 0x60] + unsigned.dropFirst(2)))   // RTP's first byte
    }

    /// Found by FuzzSTUN: an ERROR-CODE number byte of 255 was read as code
    /// 955, which encodes as 9, 55 and reads back as 155. A number must be 0-99.
    @Test func anErrorCodeNumberOver99IsRefused() throws {
        let crash = Self.hex("""
            01110018 2112a442 01020304 05060708 090a0b0c 00090011 ffffffff ffffff6b
            00000407 526f6c65 20436fb3 666c6963 74000000
            """)
        #expect(throws: STUNError.badAttribute(type: 0x0009)) { try STUNMessage(parsing: crash) }
        // The same attribute with a number in range (class 7, number 99) still reads.
        var fixed = crash
        fixed[27] = 99
        #expect(try STUNMessage(parsing: fixed).attributes.first == .errorCode(code: 799, reason: "\u{FFFD}\u{FFFD}\u{FFFD}k\0\0\u{04}\u{07}Role "))
    }
}
