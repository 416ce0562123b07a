import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// libFuzzer's entry point as each target defines it (`@_cdecl("LLVMFuzzerTestOneInput")`).
@_silgen_name("LLVMFuzzerTestOneInput")
private func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt

@_silgen_name("LLVMFuzzerRunDriver")
private func runDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// Runs libFuzzer with the process's arguments and exits with its status.
/// SwiftPM links an executable's `main` to its module's top-level code, so
/// libFuzzer's own `main` never runs: each target's main.swift calls this.
public func runFuzzer() -> Never {
    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    exit(runDriver(&argc, &argv, testOneInput))
}

/// The input as bytes (libFuzzer may pass a null pointer with size 0).
public func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// An invariant the target checks; a violation is a crash libFuzzer records.
public func check(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
                  file: StaticString = #file, line: UInt = #line) {
    if !condition() { fatalError("invariant violated: \(message())", file: file, line: line) }
}

/// Runs async code to completion from libFuzzer's synchronous callback.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        box.set(await body())
        done.signal()
    }
    done.wait()
    return box.get()
}

private final class ResultBox<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)
    func set(_ v: T) { value.withLock { $0 = v } }
    func get() -> T { value.withLock { $0! } }
}
