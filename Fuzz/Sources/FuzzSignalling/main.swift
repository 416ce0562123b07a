// Signalling JSON: ClientMessage.parse, which every text message on the
// router's WebSocket goes through, and the text the router sends back (a
// refusal's `error` message, a relayed signal's data) must be JSON that reads
// back the same.
import FoundationEssentials
import FuzzSupport
@testable import SessionServer

private struct ErrorMessage: Decodable {
    var type: String
    var code: Int
    var message: String
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: bytes(data, size), as: UTF8.self)
    let message: ClientMessage
    do { message = try ClientMessage.parse(text) } catch {
        check((400...499).contains(error.code), "refusal code \(error.code)")
        let reply = error.messageText
        guard let sent = try? JSONDecoder().decode(ErrorMessage.self, from: Data(reply.utf8)),
              sent.type == "error", sent.code == error.code, sent.message == error.message else {
            fatalError("the error message is not the JSON it should be: \(reply)")
        }
        return 0
    }
    if case .signal(let signalType, let value, _) = message {
        let relayed = jsonText(value)
        check(relayed.utf8.count <= ClientMessage.maxSignalDataBytes, "signal data of \(relayed.utf8.count) bytes")
        check((signalType?.count ?? 0) <= ClientMessage.maxSignalTypeLength, "signalType of \(signalType?.count ?? 0)")
        guard let back = try? JSONDecoder().decode(JSONValue.self, from: Data(relayed.utf8)) else {
            fatalError("relayed signal data does not decode: \(relayed)")
        }
        check(back == value, "relayed data changed on a round: \(relayed) → \(jsonText(back))")
    }
    return 0
}

runFuzzer()
