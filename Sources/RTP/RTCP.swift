import WireFormat

/// RTCP packets a publisher sends and reads: sender and receiver reports
/// (RFC 3550 §6.4), SDES CNAME (§6.5), BYE (§6.6), generic NACK and PLI
/// (RFC 4585 §6.2.1, §6.3.1), FIR (RFC 5104 §4.3.1) and REMB
/// (draft-alvestrand-rmcat-remb). Compound packets parse into a list.
public enum RTCPPacket: Hashable, Sendable {
    case senderReport(SenderReport)
    case receiverReport(ssrc: UInt32, reports: [ReceptionReport])
    case sourceDescription(ssrc: UInt32, cname: String)
    case bye(ssrcs: [UInt32])
    /// Sequence numbers the receiver asks to have sent again.
    case nack(sender: UInt32, media: UInt32, lost: [UInt16])
    case pictureLossIndication(sender: UInt32, media: UInt32)
    case fullIntraRequest(sender: UInt32, media: UInt32, sequence: UInt8)
    case estimatedMaximumBitrate(sender: UInt32, bitsPerSecond: UInt64, ssrcs: [UInt32])
    /// A packet type this side does not act on (XR, APP, transport-cc, ...).
    case other(packetType: UInt8, format: UInt8)
}

public struct SenderReport: Hashable, Sendable {
    public var ssrc: UInt32
    /// NTP timestamp: seconds since 1900 in the high 32 bits, fraction in the low.
    public var ntpTimestamp: UInt64
    public var rtpTimestamp: UInt32
    public var packetCount: UInt32
    public var octetCount: UInt32
    public var reports: [ReceptionReport] = []

    public init(ssrc: UInt32, ntpTimestamp: UInt64, rtpTimestamp: UInt32, packetCount: UInt32, octetCount: UInt32) {
        self.ssrc = ssrc
        self.ntpTimestamp = ntpTimestamp
        self.rtpTimestamp = rtpTimestamp
        self.packetCount = packetCount
        self.octetCount = octetCount
    }
}

/// One report block: what a receiver saw of one source.
public struct ReceptionReport: Hashable, Sendable {
    public var ssrc: UInt32
    /// Fraction lost since the last report, out of 256.
    public var fractionLost: UInt8
    /// Cumulative packets lost (24-bit signed).
    public var cumulativeLost: Int32
    public var highestSequence: UInt32
    /// Interarrival jitter in RTP timestamp units.
    public var jitter: UInt32
    /// Middle 32 bits of the NTP time of the last SR received from the source.
    public var lastSenderReport: UInt32
    /// Delay since that SR, in 1/65536 s.
    public var delaySinceLastSenderReport: UInt32

    public init(ssrc: UInt32, fractionLost: UInt8, cumulativeLost: Int32, highestSequence: UInt32,
                jitter: UInt32, lastSenderReport: UInt32, delaySinceLastSenderReport: UInt32) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = cumulativeLost
        self.highestSequence = highestSequence
        self.jitter = jitter
        self.lastSenderReport = lastSenderReport
        self.delaySinceLastSenderReport = delaySinceLastSenderReport
    }

    /// Round-trip time from this block (RFC 3550 §6.4.1), given the middle 32
    /// bits of the NTP time it arrived; nil when the receiver has no SR yet.
    public func roundTripSeconds(arrivedAtCompactNTP now: UInt32) -> Double? {
        guard lastSenderReport != 0 else { return nil }
        let rtt = now &- lastSenderReport &- delaySinceLastSenderReport
        return rtt < 0x8000_0000 ? Double(rtt) / 65536 : nil
    }
}

public enum RTCPError: Error, Hashable, Sendable {
    case truncated
    case badVersion
}

extension RTCPPacket {
    static let sr: UInt8 = 200, rr: UInt8 = 201, sdes: UInt8 = 202, byePT: UInt8 = 203
    static let rtpfb: UInt8 = 205, psfb: UInt8 = 206

    /// Appends this packet (header, body, padded to 32 bits) to `out`.
    public func write(to out: inout [UInt8]) {
        let start = out.count
        func header(_ count: Int, _ type: UInt8) {
            out.append(0x80 | UInt8(count))
            out.append(type)
            out += [0, 0]   // length, filled in below
        }
        switch self {
        case .senderReport(let sr):
            header(sr.reports.count, Self.sr)
            out.appendBigEndian(sr.ssrc)
            out.appendBigEndian(UInt32(sr.ntpTimestamp >> 32))
            out.appendBigEndian(UInt32(sr.ntpTimestamp & 0xffff_ffff))
            out.appendBigEndian(sr.rtpTimestamp)
            out.appendBigEndian(sr.packetCount)
            out.appendBigEndian(sr.octetCount)
            for r in sr.reports { r.write(to: &out) }
        case .receiverReport(let ssrc, let reports):
            header(reports.count, Self.rr)
            out.appendBigEndian(ssrc)
            for r in reports { r.write(to: &out) }
        case .sourceDescription(let ssrc, let cname):
            header(1, Self.sdes)
            out.appendBigEndian(ssrc)
            let name = Array(cname.utf8.prefix(255))
            out.append(1)   // CNAME
            out.append(UInt8(name.count))
            out += name
            out.append(0)   // end of items, then pad to a word
            while (out.count - start) % 4 != 0 { out.append(0) }
        case .bye(let ssrcs):
            header(ssrcs.count, Self.byePT)
            for s in ssrcs { out.appendBigEndian(s) }
        case .nack(let sender, let media, let lost):
            header(1, Self.rtpfb)
            out.appendBigEndian(sender)
            out.appendBigEndian(media)
            for (pid, blp) in Self.nackItems(lost) {
                out.appendBigEndian(pid)
                out.appendBigEndian(blp)
            }
        case .pictureLossIndication(let sender, let media):
            header(1, Self.psfb)
            out.appendBigEndian(sender)
            out.appendBigEndian(media)
        case .fullIntraRequest(let sender, let media, let sequence):
            header(4, Self.psfb)
            out.appendBigEndian(sender)
            out.appendBigEndian(UInt32(0))   // media source: unused for FIR
            out.appendBigEndian(media)
            out += [sequence, 0, 0, 0]
        case .estimatedMaximumBitrate(let sender, let bps, let ssrcs):
            header(15, Self.psfb)
            out.appendBigEndian(sender)
            out.appendBigEndian(UInt32(0))
            out += Array("REMB".utf8)
            var exponent: UInt8 = 0
            var mantissa = bps
            while mantissa > 0x3ffff { mantissa >>= 1; exponent += 1 }   // 18-bit mantissa
            out.append(UInt8(ssrcs.count))
            out.append(exponent << 2 | UInt8(mantissa >> 16))
            out.appendBigEndian(UInt16(mantissa & 0xffff))
            for s in ssrcs { out.appendBigEndian(s) }
        case .other:
            preconditionFailure("only packets this side sends can be written")
        }
        let words = (out.count - start) / 4 - 1
        out[start + 2] = UInt8(words >> 8)
        out[start + 3] = UInt8(words & 0xff)
    }

    /// Lost sequence numbers as (PID, bitmask of the 16 following) pairs.
    static func nackItems(_ lost: [UInt16]) -> [(UInt16, UInt16)] {
        var items: [(UInt16, UInt16)] = []
        for seq in lost {
            if let last = items.last, seq &- last.0 >= 1, seq &- last.0 <= 16 {
                items[items.count - 1].1 |= 1 << (seq &- last.0 &- 1)
            } else {
                items.append((seq, 0))
            }
        }
        return items
    }

    /// Parses a compound RTCP packet.
    public static func parseCompound(_ bytes: ArraySlice<UInt8>) throws(RTCPError) -> [RTCPPacket] {
        var packets: [RTCPPacket] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            guard bytes.endIndex - i >= 4 else { throw .truncated }
            guard bytes[i] >> 6 == 2 else { throw .badVersion }
            let count = Int(bytes[i] & 0x1f), type = bytes[i + 1]
            let length = 4 * (Int(bytes.bigEndianUInt16(at: i + 2)) + 1)
            guard bytes.endIndex - i >= length else { throw .truncated }
            var end = i + length
            if bytes[i] & 0x20 != 0 { end -= Int(bytes[end - 1]) }   // padding
            packets.append(try parseOne(bytes[(i + 4)..<max(end, i + 4)], count: count, type: type))
            i += length
        }
        return packets
    }

    private static func parseOne(_ body: ArraySlice<UInt8>, count: Int, type: UInt8) throws(RTCPError) -> RTCPPacket {
        let b = body.startIndex
        func need(_ n: Int) throws(RTCPError) { if body.count < n { throw .truncated } }
        func u32(_ offset: Int) -> UInt32 { body.bigEndianUInt32(at: b + offset) }
        func reports(from offset: Int) throws(RTCPError) -> [ReceptionReport] {
            try need(offset + 24 * count)
            return (0..<count).map { ReceptionReport(parsing: body, at: b + offset + 24 * $0) }
        }
        switch type {
        case sr:
            try need(24)
            var report = SenderReport(ssrc: u32(0), ntpTimestamp: UInt64(u32(4)) << 32 | UInt64(u32(8)),
                                      rtpTimestamp: u32(12), packetCount: u32(16), octetCount: u32(20))
            report.reports = try reports(from: 24)
            return .senderReport(report)
        case rr:
            try need(4)
            return .receiverReport(ssrc: u32(0), reports: try reports(from: 4))
        case sdes:
            // The first chunk's CNAME item, if any.
            try need(4)
            var j = b + 4
            while j + 2 <= body.endIndex, body[j] != 0 {
                let kind = body[j], n = Int(body[j + 1])
                guard j + 2 + n <= body.endIndex else { throw .truncated }
                if kind == 1 {
                    return .sourceDescription(ssrc: u32(0), cname: String(decoding: body[(j + 2)..<(j + 2 + n)], as: UTF8.self))
                }
                j += 2 + n
            }
            return .sourceDescription(ssrc: u32(0), cname: "")
        case byePT:
            try need(4 * count)
            return .bye(ssrcs: (0..<count).map { u32(4 * $0) })
        case rtpfb where count == 1:
            try need(8)
            var lost: [UInt16] = []
            var j = 8
            while j + 4 <= body.count {
                let pid = body.bigEndianUInt16(at: b + j), blp = body.bigEndianUInt16(at: b + j + 2)
                lost.append(pid)
                for bit in 0..<16 where blp & (1 << bit) != 0 { lost.append(pid &+ UInt16(bit) &+ 1) }
                j += 4
            }
            return .nack(sender: u32(0), media: u32(4), lost: lost)
        case psfb where count == 1:
            try need(8)
            return .pictureLossIndication(sender: u32(0), media: u32(4))
        case psfb where count == 4:
            try need(16)
            return .fullIntraRequest(sender: u32(0), media: u32(8), sequence: body[b + 12])
        case psfb where count == 15 && body.count >= 16 && Array(body[(b + 8)..<(b + 12)]) == Array("REMB".utf8):
            let n = Int(body[b + 12]), exponent = body[b + 13] >> 2
            let mantissa = UInt64(body[b + 13] & 0x03) << 16 | UInt64(body.bigEndianUInt16(at: b + 14))
            try need(16 + 4 * n)
            return .estimatedMaximumBitrate(sender: u32(0), bitsPerSecond: mantissa << exponent,
                                            ssrcs: (0..<n).map { u32(16 + 4 * $0) })
        default:
            return .other(packetType: type, format: UInt8(count))
        }
    }
}

extension ReceptionReport {
    init(parsing bytes: ArraySlice<UInt8>, at i: Int) {
        let lost = UInt32(bytes[i + 5]) << 16 | UInt32(bytes[i + 6]) << 8 | UInt32(bytes[i + 7])
        self.init(ssrc: bytes.bigEndianUInt32(at: i), fractionLost: bytes[i + 4],
                  cumulativeLost: Int32(bitPattern: lost << 8) >> 8,
                  highestSequence: bytes.bigEndianUInt32(at: i + 8), jitter: bytes.bigEndianUInt32(at: i + 12),
                  lastSenderReport: bytes.bigEndianUInt32(at: i + 16),
                  delaySinceLastSenderReport: bytes.bigEndianUInt32(at: i + 20))
    }

    func write(to out: inout [UInt8]) {
        out.appendBigEndian(ssrc)
        out.append(fractionLost)
        let lost = UInt32(bitPattern: max(min(cumulativeLost, 0x7f_ffff), -0x80_0000)) & 0xff_ffff
        out += [UInt8(lost >> 16), UInt8((lost >> 8) & 0xff), UInt8(lost & 0xff)]
        out.appendBigEndian(highestSequence)
        out.appendBigEndian(jitter)
        out.appendBigEndian(lastSenderReport)
        out.appendBigEndian(delaySinceLastSenderReport)
    }
}
