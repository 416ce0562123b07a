/// An RFC 8285 one-byte header extension element carrying one byte.
public struct OneByteExtension: Hashable, Sendable {
    /// The "defined by profile" value that marks the one-byte form.
    public static let profile: UInt16 = 0xBEDE
    /// 1...14, as negotiated with a=extmap.
    public var id: UInt8
    public var value: UInt8

    public init(id: UInt8, value: UInt8) {
        precondition((1...14).contains(id), "one-byte extension ids are 1 to 14")
        self.id = id
        self.value = value
    }

    /// Finds element `id` with a one-byte value in a parsed header's extension block.
    public static func find(_ id: UInt8, in header: RTPHeader) -> UInt8? {
        guard header.extensionProfile == profile else { return nil }
        var i = 0
        let data = header.extensionData
        while i < data.count {
            let byte = data[i]
            if byte == 0 { i += 1; continue }   // padding
            let elementID = byte >> 4, length = Int(byte & 0x0f) + 1
            if elementID == 15 { return nil }   // reserved: stop
            if elementID == id, length >= 1, i + 1 < data.count { return data[i + 1] }
            i += 1 + length
        }
        return nil
    }
}
