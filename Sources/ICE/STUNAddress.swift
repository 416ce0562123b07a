/// An IPv4 or IPv6 address and port, as 4 or 16 bytes in network order.
public struct STUNAddress: Hashable, Sendable, CustomStringConvertible {
    public var address: [UInt8]
    public var port: UInt16

    public init(address: [UInt8], port: UInt16) {
        precondition(address.count == 4 || address.count == 16, "IPv4 or IPv6")
        self.address = address
        self.port = port
    }

    public var description: String {
        if address.count == 4 { return address.map(String.init).joined(separator: ".") + ":\(port)" }
        let groups = stride(from: 0, to: 16, by: 2).map { String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16) }
        return "[\(groups.joined(separator: ":"))]:\(port)"
    }
}
