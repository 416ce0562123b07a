import WireFormat

/// The receiving side of the payload formats: used by the tests to check the
/// payloaders against the RFCs' layouts, and by subscribers.
public enum DepacketizeError: Error, Hashable, Sendable {
    case truncated
    case unsupportedNALType(UInt8)
}

/// A parsed RFC 7741 VP8 payload descriptor.
public struct VP8PayloadDescriptor: Hashable, Sendable {
    public var startOfPartition: Bool
    public var partitionIndex: UInt8
    public var nonReference: Bool
    public var pictureID: UInt16?
    /// TL0PICIDX and TID, when the sender makes temporal layers.
    public var tl0PictureIndex: UInt8?
    public var temporalLayer: UInt8?
    /// Where the VP8 data starts in the payload.
    public var headerSize: Int

    public init(parsing payload: ArraySlice<UInt8>) throws(DepacketizeError) {
        var i = payload.startIndex
        guard i < payload.endIndex else { throw .truncated }
        let first = payload[i]
        startOfPartition = first & 0x10 != 0
        nonReference = first & 0x20 != 0
        partitionIndex = first & 0x07
        pictureID = nil
        tl0PictureIndex = nil
        temporalLayer = nil
        i += 1
        if first & 0x80 != 0 {
            guard i < payload.endIndex else { throw .truncated }
            let x = payload[i]
            i += 1
            if x & 0x80 != 0 {  // I: PictureID, 7 or 15 bits
                guard i < payload.endIndex else { throw .truncated }
                if payload[i] & 0x80 != 0 {
                    guard i + 1 < payload.endIndex else { throw .truncated }
                    pictureID = UInt16(payload[i] & 0x7f) << 8 | UInt16(payload[i + 1])
                    i += 2
                } else {
                    pictureID = UInt16(payload[i])
                    i += 1
                }
            }
            if x & 0x40 != 0 {                          // L: TL0PICIDX
                guard i < payload.endIndex else { throw .truncated }
                tl0PictureIndex = payload[i]
                i += 1
            }
            if x & 0x20 != 0 || x & 0x10 != 0 {         // T or K: TID/Y/KEYIDX
                guard i < payload.endIndex else { throw .truncated }
                if x & 0x20 != 0 { temporalLayer = payload[i] >> 6 }
                i += 1
            }
        }
        guard i <= payload.endIndex else { throw .truncated }
        headerSize = i - payload.startIndex
    }
}

/// Rebuilds Annex B access units from RFC 6184 payloads (single NAL unit,
/// STAP-A, FU-A).
public struct H264Depacketizer: Sendable {
    public init() {}

    static let startCode: [UInt8] = [0, 0, 0, 1]

    /// Appends the NAL units in `payload` to `out` in Annex B form; a payload
    /// it refuses leaves `out` as it was.
    public func append(_ payload: ArraySlice<UInt8>, to out: inout [UInt8]) throws(DepacketizeError) {
        guard let first = payload.first else { throw .truncated }
        let type = first & 0x1f
        switch type {
        case 1...23:
            out += Self.startCode
            out += payload
        case H264Payloader.stapA:
            // Every unit's size is checked before any is written: a refused payload adds nothing.
            var i = payload.startIndex + 1
            while i < payload.endIndex {
                guard i + 2 <= payload.endIndex else { throw .truncated }
                let size = Int(payload.bigEndianUInt16(at: i))
                guard size > 0, i + 2 + size <= payload.endIndex else { throw .truncated }
                i += 2 + size
            }
            i = payload.startIndex + 1
            while i < payload.endIndex {
                let size = Int(payload.bigEndianUInt16(at: i))
                out += Self.startCode
                out += payload[(i + 2)..<(i + 2 + size)]
                i += 2 + size
            }
        case H264Payloader.fuA:
            guard payload.count >= 2 else { throw .truncated }
            let header = payload[payload.startIndex + 1]
            if header & 0x80 != 0 {
                out += Self.startCode
                out.append(first & 0xe0 | header & 0x1f)
            }
            out += payload[(payload.startIndex + 2)...]
        default:
            throw .unsupportedNALType(type)
        }
    }
}
