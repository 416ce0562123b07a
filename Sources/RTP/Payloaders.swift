import WireFormat

/// Cuts encoded frames into RTP payloads.
///
/// For each packet the payloader calls `packet(isLast, appendPayload)`; the
/// sender writes its RTP header into a reusable buffer and calls
/// `appendPayload(&buffer)`, which appends the payload header and the frame's
/// bytes straight after it: one copy from encoder output to packet, no
/// allocation per packet.
public protocol RTPPayloader {
    mutating func packetize(_ frame: UnsafeRawBufferPointer, maxPayloadSize: Int,
                            packet: (_ isLast: Bool, _ appendPayload: (inout [UInt8]) -> Void) -> Void)
    /// The same for a frame of a temporal layer (nil: the encoder makes none);
    /// formats with no place for the layer ignore it.
    mutating func packetize(_ frame: UnsafeRawBufferPointer, temporalLayer: UInt8?, maxPayloadSize: Int,
                            packet: (_ isLast: Bool, _ appendPayload: (inout [UInt8]) -> Void) -> Void)
}

extension RTPPayloader {
    public mutating func packetize(_ frame: UnsafeRawBufferPointer, temporalLayer: UInt8?, maxPayloadSize: Int,
                                   packet: (_ isLast: Bool, _ appendPayload: (inout [UInt8]) -> Void) -> Void) {
        packetize(frame, maxPayloadSize: maxPayloadSize, packet: packet)
    }
}

extension Array where Element == UInt8 {
    mutating func append(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) {
        append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[range]))
    }
}

/// VP8 (RFC 7741): a payload descriptor — X=1, S on the first packet of a
/// frame, partition index 0, and a 15-bit PictureID that the receiver uses to
/// spot lost frames; with temporal layers also TL0PICIDX and the frame's
/// layer (TID), so a receiver that misses upper-layer frames knows it lost
/// nothing it needs — then a slice of the frame.
public struct VP8Payloader: RTPPayloader {
    public private(set) var pictureID: UInt16
    /// Counts base-layer frames; each frame carries the one it refers to.
    public private(set) var tl0PictureIndex: UInt8
    static let descriptorSize = 4
    static let layeredDescriptorSize = 6

    public init(firstPictureID: UInt16 = 0, firstTL0PictureIndex: UInt8 = 0) {
        pictureID = firstPictureID & 0x7fff
        tl0PictureIndex = firstTL0PictureIndex
    }

    public mutating func packetize(_ frame: UnsafeRawBufferPointer, maxPayloadSize: Int,
                                   packet: (Bool, (inout [UInt8]) -> Void) -> Void) {
        packetize(frame, temporalLayer: nil, maxPayloadSize: maxPayloadSize, packet: packet)
    }

    /// `temporalLayer` nil: the encoder makes no layers (4-byte descriptor).
    public mutating func packetize(_ frame: UnsafeRawBufferPointer, temporalLayer: UInt8?, maxPayloadSize: Int,
                                   packet: (Bool, (inout [UInt8]) -> Void) -> Void) {
        let room = maxPayloadSize - (temporalLayer == nil ? Self.descriptorSize : Self.layeredDescriptorSize)
        precondition(room > 0, "payload size too small for the VP8 descriptor")
        let id = pictureID
        if temporalLayer == 0 { tl0PictureIndex &+= 1 }
        let tl0 = tl0PictureIndex
        // N: an upper-layer frame is no reference (VP8Encoder makes it so).
        let nonReference: UInt8 = (temporalLayer ?? 0) > 0 ? 0x20 : 0
        var start = 0
        repeat {
            let end = min(start + room, frame.count)
            let first = start == 0
            packet(end == frame.count) { out in
                out.append((first ? 0x90 : 0x80) | nonReference)   // X=1, N, S=first, PID=0
                out.append(temporalLayer == nil ? 0x80 : 0xe0)      // I (PictureID); with layers L and T too
                out.append(0x80 | UInt8(id >> 8))                   // M=1: 15-bit PictureID
                out.append(UInt8(id & 0xff))
                if let layer = temporalLayer {
                    out.append(tl0)
                    out.append(layer << 6 | 0x20)                   // TID, Y=1 (refers to base frames only)
                }
                out.append(frame, start..<end)
            }
            start = end
        } while start < frame.count
        pictureID = (pictureID + 1) & 0x7fff
    }
}

/// Opus (RFC 7587): one encoded frame per packet, as it comes.
public struct OpusPayloader: RTPPayloader {
    public init() {}

    public mutating func packetize(_ frame: UnsafeRawBufferPointer, maxPayloadSize: Int,
                                   packet: (Bool, (inout [UInt8]) -> Void) -> Void) {
        precondition(frame.count <= maxPayloadSize, "an Opus frame never needs splitting")
        packet(true) { out in out.append(frame, 0..<frame.count) }
    }
}

/// H.264 (RFC 6184, packetization-mode=1): the Annex B access unit is split
/// into NAL units; a unit that fits goes alone (single NAL unit packet),
/// neighbours that fit together are aggregated (STAP-A, as SPS+PPS before a
/// keyframe), and a unit too large is fragmented (FU-A).
public struct H264Payloader: RTPPayloader {
    static let stapA: UInt8 = 24
    static let fuA: UInt8 = 28

    public init() {}

    public mutating func packetize(_ frame: UnsafeRawBufferPointer, maxPayloadSize: Int,
                                   packet: (Bool, (inout [UInt8]) -> Void) -> Void) {
        precondition(maxPayloadSize > 3, "payload size too small for FU-A")
        var units = AnnexBUnits(frame).makeIterator()
        var beforePending = units   // iterator state from which `pending` was read
        var pending = units.next()
        while let unit = pending {
            let groupStart = beforePending
            beforePending = units
            pending = units.next()
            if unit.count > maxPayloadSize {
                fragment(frame, unit, maxPayloadSize: maxPayloadSize, lastUnit: pending == nil, packet: packet)
                continue
            }
            // Aggregate following units while they fit: 1 byte STAP-A header, 2 bytes of size each.
            var count = 1
            var size = 1 + 2 + unit.count
            while let next = pending, size + 2 + next.count <= maxPayloadSize {
                count += 1
                size += 2 + next.count
                beforePending = units
                pending = units.next()
            }
            let isLast = pending == nil
            if count == 1 {
                packet(isLast) { out in out.append(frame, unit) }
                continue
            }
            // The group is re-read from a copy of the iterator: no array of units per packet.
            packet(isLast) { out in
                var f: UInt8 = 0, nri: UInt8 = 0
                var group = groupStart
                for _ in 0..<count {
                    let header = frame[group.next()!.lowerBound]
                    f |= header & 0x80
                    nri = max(nri, header & 0x60)
                }
                out.append(f | nri | Self.stapA)
                group = groupStart
                for _ in 0..<count {
                    let u = group.next()!
                    out.appendBigEndian(UInt16(u.count))
                    out.append(frame, u)
                }
            }
        }
    }

    private func fragment(_ frame: UnsafeRawBufferPointer, _ unit: Range<Int>, maxPayloadSize: Int, lastUnit: Bool,
                          packet: (Bool, (inout [UInt8]) -> Void) -> Void) {
        let nalHeader = frame[unit.lowerBound]
        let indicator = nalHeader & 0xe0 | Self.fuA
        let type = nalHeader & 0x1f
        let room = maxPayloadSize - 2
        var start = unit.lowerBound + 1   // the NAL header travels in the FU indicator and header
        while start < unit.upperBound {
            let end = min(start + room, unit.upperBound)
            let first = start == unit.lowerBound + 1, last = end == unit.upperBound
            packet(last && lastUnit) { out in
                out.append(indicator)
                out.append((first ? 0x80 : 0) | (last ? 0x40 : 0) | type)
                out.append(frame, start..<end)
            }
            start = end
        }
    }
}

/// The NAL units of an Annex B byte stream (start codes 00 00 01 or
/// 00 00 00 01), as ranges without their start codes.
public struct AnnexBUnits: Sequence {
    let bytes: UnsafeRawBufferPointer

    public init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    public struct Iterator: IteratorProtocol {
        let bytes: UnsafeRawBufferPointer
        var position: Int

        public mutating func next() -> Range<Int>? {
            guard let start = startCode(from: position) else { return nil }
            let begin = start.upperBound
            let following = startCode(from: begin)
            var end = following?.lowerBound ?? bytes.count
            // A 4-byte start code's leading zero is not part of the unit before it.
            while end > begin, bytes[end - 1] == 0, following != nil { end -= 1 }
            position = following?.lowerBound ?? bytes.count
            return begin < end ? begin..<end : next()
        }

        /// The next 00 00 01 at or after `from`, as the range of those 3 bytes.
        private func startCode(from: Int) -> Range<Int>? {
            var i = from
            while i + 2 < bytes.count {
                if bytes[i + 2] > 1 { i += 3; continue }
                if bytes[i] == 0, bytes[i + 1] == 0, bytes[i + 2] == 1 { return i..<(i + 3) }
                i += 1
            }
            return nil
        }
    }

    public func makeIterator() -> Iterator { Iterator(bytes: bytes, position: 0) }
}
