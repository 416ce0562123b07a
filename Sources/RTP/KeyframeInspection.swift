/// What a forwarder needs to know of a payload without decoding it: whether
/// it starts a keyframe (a subscriber can begin there) and the picture size
/// a keyframe announces (VP8's frame header, H.264's sequence parameter set).
public enum KeyframeInspection {
    /// For the first packet of a VP8 frame: nil when the payload does not
    /// start the frame's first partition; else whether the frame is a
    /// keyframe, with the size from its header (RFC 6386 §9.1) when it is.
    public static func vp8(_ payload: ArraySlice<UInt8>) -> (isKeyframe: Bool, width: Int?, height: Int?)? {
        guard let descriptor = try? VP8PayloadDescriptor(parsing: payload),
              descriptor.startOfPartition, descriptor.partitionIndex == 0 else { return nil }
        let frame = payload.dropFirst(descriptor.headerSize)
        guard let tag = frame.first else { return nil }
        guard tag & 0x01 == 0 else { return (false, nil, nil) }   // P bit set: an interframe
        let size = vp8KeyframeSize(frame)
        return (true, size?.width, size?.height)
    }

    /// The picture size a VP8 keyframe's header announces, from the frame's
    /// own bytes (no payload descriptor); nil for an interframe or a short header.
    public static func vp8KeyframeSize(_ frame: ArraySlice<UInt8>) -> (width: Int, height: Int)? {
        let s = frame.startIndex
        // 3-byte frame tag (P bit clear), start code 9d 01 2a, then 14-bit width and height, little-endian.
        guard frame.count >= 10, frame[s] & 0x01 == 0,
              frame[s + 3] == 0x9d, frame[s + 4] == 0x01, frame[s + 5] == 0x2a else { return nil }
        let width = (Int(frame[s + 6]) | Int(frame[s + 7]) << 8) & 0x3fff
        let height = (Int(frame[s + 8]) | Int(frame[s + 9]) << 8) & 0x3fff
        return (width, height)
    }

    /// The picture size of the first SPS an H.264 payload carries (a single
    /// NAL unit or inside a STAP-A; an SPS is small enough never to be
    /// fragmented by the senders here); nil when it carries none.
    public static func h264SequenceParameterSet(_ payload: ArraySlice<UInt8>) -> H264SequenceParameterSet? {
        guard let first = payload.first else { return nil }
        switch first & 0x1f {
        case 7: return H264SequenceParameterSet(nalUnit: payload)
        case 24:
            var i = payload.startIndex + 1
            while i + 2 < payload.endIndex {
                let size = Int(payload[i]) << 8 | Int(payload[i + 1])
                let start = i + 2, end = min(start + size, payload.endIndex)
                if payload[start] & 0x1f == 7 { return H264SequenceParameterSet(nalUnit: payload[start..<end]) }
                i = start + size
            }
            return nil
        default: return nil
        }
    }

    /// Whether an H.264 payload (RFC 6184) carries the start of an IDR
    /// picture or a sequence parameter set: a single NAL unit, a STAP-A
    /// aggregating one, or the first fragment of an FU-A.
    public static func h264StartsKeyframe(_ payload: ArraySlice<UInt8>) -> Bool {
        guard let first = payload.first else { return false }
        switch first & 0x1f {
        case 5, 7: return true
        case 24:   // STAP-A: 16-bit size, then the NAL unit, repeated
            var i = payload.startIndex + 1
            while i + 2 < payload.endIndex {
                let size = Int(payload[i]) << 8 | Int(payload[i + 1])
                let type = payload[i + 2] & 0x1f
                if type == 5 || type == 7 { return true }
                i += 2 + size
            }
            return false
        case 28:   // FU-A: the start bit and the fragmented unit's type
            guard payload.count >= 2 else { return false }
            let header = payload[payload.startIndex + 1]
            return header & 0x80 != 0 && (header & 0x1f == 5 || header & 0x1f == 7)
        default: return false
        }
    }
}
