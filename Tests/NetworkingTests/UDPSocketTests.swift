#if canImport(Glibc)
import Glibc
#endif
import Networking
import TestSupport
import Testing

@Suite("UDP sockets and host interfaces", .timeLimit(.minutes(1)))
struct UDPSocketTests {
    @Test func bindSendReceiveClose() throws {
        let a = try UDPSocket(bindingTo: "127.0.0.1")
        let b = try UDPSocket(bindingTo: "127.0.0.1")
        #expect(a.local.ip == "127.0.0.1" && a.local.port != 0 && a.fileDescriptor >= 0)
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(try buffer.withUnsafeMutableBytes { try b.receive(into: $0) } == nil)
        try [UInt8]([1, 2, 3]).withUnsafeBytes { try a.send($0, to: b.local) }
        var fds = [pollfd(fd: b.fileDescriptor, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 1, 5000)
        let got = try buffer.withUnsafeMutableBytes { try b.receive(into: $0) }
        #expect(got?.count == 3)
        #expect(got?.from == a.local)
        #expect(Array(buffer[0..<3]) == [1, 2, 3])

        #expect(throws: NetworkError.self) { try UDPSocket(bindingTo: "127.0.0.1", port: a.local.port) }
        #expect(throws: NetworkError.invalidAddress("localhost")) { try UDPSocket(bindingTo: "localhost") }
        // A destination that is not a numeric address is refused at send; an IPv6 text is used as IPv6.
        #expect(throws: NetworkError.invalidAddress("example.invalid")) {
            try [UInt8]([1]).withUnsafeBytes { try a.send($0, to: TransportAddress(ip: "example.invalid", port: 9)) }
        }
        #expect(throws: NetworkError.self) {   // an IPv4 socket cannot reach an IPv6 address
            try [UInt8]([1]).withUnsafeBytes { try a.send($0, to: TransportAddress(ip: "::1", port: b.local.port)) }
        }
        a.close()
        a.close()
        #expect(a.fileDescriptor == -1)
        #expect(throws: NetworkError.socketClosed) { try [UInt8]([1]).withUnsafeBytes { try a.send($0, to: b.local) } }
    }

    /// recvmmsg: the pending datagrams in batches as large as the batch, each
    /// with its own length and sender, a longer one truncated, then nothing.
    @Test func batchReceive() throws {
        let a = try UDPSocket(bindingTo: "127.0.0.1")
        let c = try UDPSocket(bindingTo: "127.0.0.1")
        let b = try UDPSocket(bindingTo: "127.0.0.1")
        let batch = DatagramBatch(capacity: 4, datagramSize: 16)
        #expect(try b.receive(into: batch) == 0)
        // Seven datagrams: sizes 1...7 from a, then one of 40 bytes from c.
        for size in 1...7 {
            try [UInt8](repeating: UInt8(size), count: size).withUnsafeBytes { try a.send($0, to: b.local) }
        }
        try [UInt8](0..<40).withUnsafeBytes { try c.send($0, to: b.local) }
        var got: [(bytes: [UInt8], from: TransportAddress?)] = []
        var batches: [Int] = []
        for _ in 0..<50 where got.count < 8 {   // at most 5 s
            var fds = [pollfd(fd: b.fileDescriptor, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 1, 100)
            let count = try b.receive(into: batch)
            if count > 0 { batches.append(count) }
            #expect(batch.count == count)
            for index in 0..<count { got.append((Array(batch.datagram(index)), batch.sender(index))) }
        }
        #expect(got.count == 8)
        #expect(batches.allSatisfy { $0 <= 4 } && batches.reduce(0, +) == 8)
        for size in 1...7 {
            #expect(got[size - 1].bytes == [UInt8](repeating: UInt8(size), count: size))
            #expect(got[size - 1].from == a.local)
        }
        #expect(got[7].bytes == Array(0..<16))   // truncated to the batch's datagram size
        #expect(got[7].from == c.local)
        #expect(try b.receive(into: batch) == 0 && batch.count == 0)
        b.close()
        #expect(throws: NetworkError.socketClosed) { try b.receive(into: batch) }
    }

    /// Skipped (and listed as skipped) on a machine without IPv6 loopback; in a strict run
    /// (scripts/test, CI) it runs, and fails if ::1 cannot be bound.
    @Test(.enabled(if: ipv6LoopbackAvailable || strictTestEnvironment, "no IPv6 loopback (::1) on this machine"))
    func ipv6Loopback() throws {
        try #require(ipv6LoopbackAvailable, "socket(AF_INET6) cannot bind ::1 here, and this run requires it")
        let socket = try UDPSocket(bindingTo: "::1")
        #expect(socket.local.ip == "::1" && socket.local.description == "[::1]:\(socket.local.port)")
    }

    @Test func bindFailureNamesTheCall() throws {
        let a = try UDPSocket(bindingTo: "127.0.0.1")
        do {
            _ = try UDPSocket(bindingTo: "127.0.0.1", port: a.local.port)
            Issue.record("a second bind to the same port succeeded")
        } catch {
            #expect(error == .systemCall("bind(\(a.local))", errno: EADDRINUSE))
            #expect(error.description.hasPrefix("bind(127.0.0.1:"))
        }
    }

    @Test func hostInterfaces() {
        let withLoopback = HostInterfaces.addresses(includeLoopback: true)
        #expect(withLoopback.contains { $0.ip == "127.0.0.1" })
        #expect(!HostInterfaces.addresses().contains { $0.ip == "127.0.0.1" || $0.ip == "::1" })
        #expect(!withLoopback.contains { $0.ip.lowercased().hasPrefix("fe80:") })
        // IPv4 first.
        if let firstV6 = withLoopback.firstIndex(where: { $0.ip.contains(":") }) {
            #expect(!withLoopback[firstV6...].contains { !$0.ip.contains(":") })
        }
    }
}
