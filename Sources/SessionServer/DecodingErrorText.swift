import FoundationEssentials

/// A decoding error in words a client can act on: which field, what was
/// wrong. One wording for signalling messages, REST bodies and token claims;
/// `document` names the whole ("the message", "the payload") and `member`
/// one of its parts ("field kind", "claim exp").
func describe(_ error: DecodingError, document: String = "the message",
              member: (String) -> String = { "field \($0)" }) -> String {
    func path(_ context: DecodingError.Context) -> String {
        let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
        return keys.isEmpty ? document : member(keys.joined(separator: "."))
    }
    switch error {
    case .keyNotFound(let key, let context):
        let parent = context.codingPath.isEmpty ? "" : " in \(path(context))"
        return "\(member(key.stringValue)) is missing\(parent)"
    case .typeMismatch(let type, let context): return "\(path(context)) is not a \(typeName(type))"
    case .valueNotFound(let type, let context): return "\(path(context)) is null, a \(typeName(type)) is needed"
    case .dataCorrupted(let context): return "\(path(context)): \(context.debugDescription)"
    @unknown default: return "\(error)"
    }
}

private func typeName(_ type: Any.Type) -> String {
    switch type {
    case is Bool.Type: "boolean"
    case is String.Type: "string"
    case is Int.Type: "whole number"
    case is Double.Type: "number"
    case is [String: Any].Type: "JSON object"
    default: String(describing: type).hasPrefix("Dictionary<") ? "JSON object"
        : String(describing: type).hasPrefix("Array<") ? "JSON array" : "\(type)"
    }
}
