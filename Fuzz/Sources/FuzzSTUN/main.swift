// STUN: STUNMessage(parsing:) with and without a MESSAGE-INTEGRITY key (as
// the ICE agent reads a request and a response), then our encoding of what
// was parsed must parse back to the same message, integrity and fingerprint
// included.
import FuzzSupport
import ICE

private let key = Array("passwordpasswordpassword".utf8)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    _ = STUNMessage.looksLikeSTUN(input[...])
    _ = try? STUNMessage(parsing: input, integrityKey: key)
    guard let message = try? STUNMessage(parsing: input) else { return 0 }
    let encoded = message.encoded(integrityKey: key, fingerprint: true)
    let again: STUNMessage
    do { again = try STUNMessage(parsing: encoded, integrityKey: key) } catch {
        fatalError("our encoding of a parsed message does not parse: \(error)\n\(message)")
    }
    check(again == message, "round trip changed the message:\n\(message)\n---\n\(again)")
    return 0
}

runFuzzer()
