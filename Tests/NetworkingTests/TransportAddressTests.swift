#if canImport(Glibc)
import Glibc
#endif
import Networking
import Testing

@Suite("Transport addresses")
struct TransportAddressTests {
    @Test func equalityIsByTextAndPort() {
        let a = TransportAddress(ip: "10.0.0.1", port: 5000)
        #expect(a == TransportAddress(ip: "10.0.0.1", port: 5000))
        #expect(a != TransportAddress(ip: "10.0.0.1", port: 5001))
        #expect(a != TransportAddress(ip: "10.0.0.2", port: 5000))
        // The same address written two ways is two values until made canonical (ICE does).
        #expect(TransportAddress(ip: "::1", port: 1) != TransportAddress(ip: "::0:1", port: 1))
        #expect(Set([a, TransportAddress(ip: "10.0.0.1", port: 5000)]).count == 1)
        #expect(TransportAddress(ip: "example.invalid", port: 9) == TransportAddress(ip: "example.invalid", port: 9))
    }

    @Test func descriptionAndFamily() {
        #expect(TransportAddress(ip: "1.2.3.4", port: 5).description == "1.2.3.4:5")
        #expect(TransportAddress(ip: "2001:db8::1", port: 5).description == "[2001:db8::1]:5")
        #expect(TransportAddress(ip: "2001:db8::1", port: 5).isIPv6)
        #expect(!TransportAddress(ip: "1.2.3.4", port: 5).isIPv6)
    }

    /// Changing `ip` or `port` changes where a send goes: the kept socket address follows.
    @Test func aChangedAddressSendsToTheNewPlace() throws {
        let sender = try UDPSocket(bindingTo: "127.0.0.1")
        let first = try UDPSocket(bindingTo: "127.0.0.1")
        let second = try UDPSocket(bindingTo: "127.0.0.1")
        var destination = TransportAddress(ip: "example.invalid", port: first.local.port)
        #expect(throws: NetworkError.invalidAddress("example.invalid")) {
            try [UInt8]([1]).withUnsafeBytes { try sender.send($0, to: destination) }
        }
        destination.ip = "127.0.0.1"
        try [UInt8]([1]).withUnsafeBytes { try sender.send($0, to: destination) }
        destination.port = second.local.port
        try [UInt8]([2]).withUnsafeBytes { try sender.send($0, to: destination) }

        var buffer = [UInt8](repeating: 0, count: 8)
        for (socket, byte) in [(first, UInt8(1)), (second, UInt8(2))] {
            var fds = [pollfd(fd: socket.fileDescriptor, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 1, 5000)
            let got = try buffer.withUnsafeMutableBytes { try socket.receive(into: $0) }
            #expect(got?.count == 1 && buffer[0] == byte)
            #expect(got?.from == sender.local)
        }
    }

    /// A sender's address from the kernel is made into text only when asked,
    /// and then is the same value as the address written out.
    @Test func aReceivedAddressReadsAsTheWrittenOne() throws {
        let sender = try UDPSocket(bindingTo: "127.0.0.1")
        let receiver = try UDPSocket(bindingTo: "127.0.0.1")
        try [UInt8]([7]).withUnsafeBytes { try sender.send($0, to: receiver.local) }
        var fds = [pollfd(fd: receiver.fileDescriptor, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 1, 5000)
        var buffer = [UInt8](repeating: 0, count: 8)
        let from = try #require(try buffer.withUnsafeMutableBytes { try receiver.receive(into: $0) }?.from)
        let written = TransportAddress(ip: "127.0.0.1", port: sender.local.port)
        #expect(from == written && from.hashValue == written.hashValue)
        #expect(from.ip == "127.0.0.1" && !from.isIPv6 && from.description == "127.0.0.1:\(sender.local.port)")
        var moved = from
        moved.port = receiver.local.port
        #expect(moved == receiver.local)
    }
}
