internal import COpenSSL

/// The newest OpenSSL error on this thread, as text (taken off the queue), for an
/// error message; "no OpenSSL error queued" when there is none.
package func openSSLReason() -> String {
    let code = ERR_get_error()
    guard code != 0 else { return "no OpenSSL error queued" }
    var text = [CChar](repeating: 0, count: 256)
    ERR_error_string_n(code, &text, text.count)
    return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
