#if canImport(Glibc)
import Glibc
#endif

/// errno values as text ("EBUSY (Device or resource busy)").
public enum SystemErrorText {
    public static func describe(_ code: Int32) -> String {
        let text = strerror(code).map { String(cString: $0) } ?? "unknown error"
        return "errno \(code) (\(text))"
    }
}
