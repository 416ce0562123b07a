import Foundation

/// Waits for a condition, at most `seconds` (a guard against hangs, not a timing assertion).
@discardableResult
public func eventually(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(2_000)
    }
    return condition()
}
