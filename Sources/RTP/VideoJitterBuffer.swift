/// Where received video packets wait to become whole frames: it puts them
/// back in order, asks for the missing ones again (NACK), waits for them
/// within a bound, and when one is lost for good drops what depends on it and
/// waits for a keyframe (asking for one: PLI). The subscriber decodes what
/// comes out; the router forwards it, packet payloads as they came.
///
/// Runs on the connection's thread. Packets are copied into slots allocated
/// once; a frame is assembled into storage the caller keeps (a
/// `FrameAssembly`), so nothing is allocated per packet or per frame in
/// steady state (the missing list grows only under loss).
package struct VideoJitterBuffer {
    package enum Codec: Sendable { case vp8, h264 }

    package struct Settings: Sendable {
        /// Packets held: about a second of 720p video at 2 Mbit/s.
        package var capacity = 1024
        /// How long a missing packet is waited for before the frames that
        /// need it are given up. Retransmissions on loopback or a LAN take
        /// a round trip or two.
        package var maxWait = 0.3
        /// Between two NACKs of the same packet.
        package var nackInterval = 0.04
        package var maxNackTries = 6
        /// Between two keyframe requests.
        package var pliInterval = 0.5

        package init() {}
    }

    package struct Counters: Sendable, Equatable {
        package var packets: UInt64 = 0
        package var duplicates: UInt64 = 0
        package var late: UInt64 = 0
        package var nacked: UInt64 = 0
        package var recovered: UInt64 = 0
        package var framesAssembled: UInt64 = 0
        /// Frames given up: a packet never came, or they waited for a keyframe.
        package var framesDropped: UInt64 = 0
        package var keyframeRequests: UInt64 = 0
        /// Packets held and then never handed on: the rest of a frame given
        /// up, frames skipped while waiting for a keyframe. (Late and
        /// duplicate packets are counted above, and never held.)
        package var discarded: UInt64 = 0

        package init() {}
    }

    /// A whole frame, whose payloads went to the caller's `FrameAssembly`.
    package struct Frame: Sendable, Equatable {
        package var timestamp: UInt32
        package var isKeyframe: Bool
        package var firstSequence: Int64
        package var lastSequence: Int64

        package init(timestamp: UInt32, isKeyframe: Bool, firstSequence: Int64, lastSequence: Int64) {
            self.timestamp = timestamp
            self.isKeyframe = isKeyframe
            self.firstSequence = firstSequence
            self.lastSequence = lastSequence
        }
    }

    private struct Slot {
        var sequence: Int64 = -1
        var timestamp: UInt32 = 0
        var marker = false
        /// The packet begins a frame (VP8: S bit, partition 0).
        var startsFrame = false
        var startsKeyframe = false
        var payload: [UInt8] = []
    }

    private struct Missing {
        var sequence: Int64
        var since: Double
        var lastNack: Double
        var tries: Int
    }

    package let codec: Codec
    package let settings: Settings
    private var slots: [Slot]
    /// The extended sequence number of the first packet not yet assembled or given up.
    private var next: Int64?
    private var highest: Int64 = -1
    private var missing: [Missing] = []
    private var lastPLI = -Double.infinity
    private var lastFrameTimestamp: UInt32?
    package private(set) var waitingForKeyframe = true
    package private(set) var counters = Counters()
    private let depacketizer = H264Depacketizer()

    package init(codec: Codec, settings: Settings = Settings()) {
        self.codec = codec
        self.settings = settings
        var slot = Slot()
        slot.payload.reserveCapacity(1500)
        slots = Array(repeating: slot, count: settings.capacity)
        for index in slots.indices { slots[index].payload.reserveCapacity(1500) }   // each its own storage
        missing.reserveCapacity(64)
    }

    /// The 16-bit sequence number extended against the highest seen.
    private func extend(_ sequence: UInt16) -> Int64 {
        guard highest >= 0 else { return Int64(sequence) + (1 << 16) }   // room below the first packet
        var candidate = (highest & ~0xFFFF) | Int64(sequence)
        if candidate - highest > 0x8000 { candidate -= 1 << 16 } else if highest - candidate > 0x8000 { candidate += 1 << 16 }
        return candidate
    }

    /// Files one packet. `feedback` gets what to send back now: NACKs for
    /// packets that went missing, a PLI when a keyframe is needed.
    package mutating func insert(_ packet: RTPPacketView, bytes: ArraySlice<UInt8>, now: Double,
                         feedback: inout FeedbackRequests) {
        counters.packets += 1
        let sequence = extend(packet.sequenceNumber)
        if next == nil { next = sequence }
        guard let first = next, sequence >= first else {
            counters.late += 1
            return
        }
        if sequence - first >= Int64(settings.capacity) {
            // Far ahead of what is still waiting: the buffer cannot bridge it.
            restart(at: sequence, now: now, feedback: &feedback)
        }
        let index = Int(sequence % Int64(settings.capacity))
        if slots[index].sequence == sequence {
            counters.duplicates += 1
            return
        }
        let payload = bytes[packet.payload]
        slots[index].sequence = sequence
        slots[index].timestamp = packet.timestamp
        slots[index].marker = packet.marker
        switch codec {
        case .vp8:
            let inspected = KeyframeInspection.vp8(payload)
            slots[index].startsFrame = inspected != nil
            slots[index].startsKeyframe = inspected?.isKeyframe ?? false
        case .h264:
            slots[index].startsKeyframe = KeyframeInspection.h264StartsKeyframe(payload)
            slots[index].startsFrame = false   // known from its neighbours: see `startsFrame(at:)`
        }
        slots[index].payload.removeAll(keepingCapacity: true)
        slots[index].payload.append(contentsOf: payload)

        if sequence > highest {
            if highest >= 0, sequence - highest > 1 {
                let gap = sequence - highest - 1
                if gap > Int64(settings.capacity / 2) {
                    restart(at: sequence, now: now, feedback: &feedback)
                } else {
                    for lost in (highest + 1)..<sequence {
                        missing.append(Missing(sequence: lost, since: now, lastNack: -.infinity, tries: 0))
                    }
                }
            }
            highest = sequence
        } else if let found = missing.firstIndex(where: { $0.sequence == sequence }) {
            missing.remove(at: found)
            counters.recovered += 1
        }
        collectNacks(now: now, feedback: &feedback)
    }

    /// The next whole frame, in order, as the codec's bitstream in
    /// `frameBytes` (VP8 data, or H.264 in Annex B); nil when none is ready.
    package mutating func nextFrame(into frameBytes: inout [UInt8], now: Double,
                                    feedback: inout FeedbackRequests) -> Frame? {
        var bitstream = Bitstream(codec: codec, depacketizer: depacketizer)
        swap(&bitstream.bytes, &frameBytes)   // the caller's buffer, without a copy
        defer { swap(&bitstream.bytes, &frameBytes) }
        return nextFrame(into: &bitstream, now: now, feedback: &feedback)
    }

    /// The next whole frame, in order, its payloads given to `assembly`; nil
    /// when none is ready. Gives up frames whose packets waited past the bound.
    package mutating func nextFrame<Assembly: FrameAssembly>(into assembly: inout Assembly, now: Double,
                                                             feedback: inout FeedbackRequests) -> Frame? {
        guard next != nil else { return nil }
        if waitingForKeyframe { seekKeyframe() }
        var passes = 0
        while let first = next, first <= highest {
            // Every pass moves `next` on or returns, so there are never more passes than packets
            // held. More is a bug the packets found: start again at a keyframe rather than spin
            // on the receive thread (debug builds stop here, for the tests to find it).
            passes += 1
            if passes > 2 * settings.capacity + 16 {
                assertionFailure("VideoJitterBuffer.nextFrame made no progress at sequence \(first)")
                discard(upTo: highest + 1)
                giveUp(now: now, feedback: &feedback)
                return nil
            }
            guard present(first) else {
                if waitingForKeyframe { return nil }
                // The next packet in order is missing: wait for it within the bound.
                awaitPacket(first, now: now)
                if giveUpOnLost(now: now, feedback: &feedback) { continue }
                return nil
            }
            if !startsFrame(at: first) {
                // The frame's beginning was given up: what follows cannot decode.
                giveUp(now: now, feedback: &feedback)
                seekKeyframe()
                continue
            }
            // Walk to the frame's marker packet.
            var last = first
            let timestamp = slot(first).timestamp
            var gaveUp = false
            while !slot(last).marker {
                let following = last + 1
                guard following <= highest, present(following) else {
                    if following <= highest {
                        awaitPacket(following, now: now)
                        gaveUp = giveUpOnLost(now: now, feedback: &feedback)
                        if gaveUp { break }
                    }
                    return nil   // the rest of the frame has not arrived (yet)
                }
                if slot(following).timestamp != timestamp { break }   // the marker was lost: the frame ends here
                last = following
            }
            if gaveUp { continue }   // a packet it needed is lost for good
            let isKeyframe = slot(first).startsKeyframe
            if waitingForKeyframe && !isKeyframe {
                discard(upTo: last + 1)
                counters.framesDropped += 1
                continue
            }
            assembly.beginFrame()
            var broken = false
            for sequence in first...last where !assembly.add(slot(sequence).payload[...]) { broken = true }
            lastFrameTimestamp = timestamp
            if broken {
                discard(upTo: last + 1)
                giveUp(now: now, feedback: &feedback)
                continue
            }
            next = last + 1
            waitingForKeyframe = false
            counters.framesAssembled += 1
            return Frame(timestamp: timestamp, isKeyframe: isKeyframe, firstSequence: first, lastSequence: last)
        }
        return nil
    }

    /// The decoder could not use a frame: what follows needs a keyframe.
    package mutating func decodeFailed(now: Double, feedback: inout FeedbackRequests) {
        waitingForKeyframe = true
        requestKeyframe(now: now, feedback: &feedback)
    }

    /// Sequences still missing and not yet given up (for tests and stats).
    package var missingSequences: [Int64] { missing.map(\.sequence) }

    // MARK: Inside

    private func slot(_ sequence: Int64) -> Slot { slots[Int(sequence % Int64(settings.capacity))] }

    private func present(_ sequence: Int64) -> Bool { slot(sequence).sequence == sequence }

    /// Whether the packet at `sequence` begins a frame. VP8 says so in its
    /// descriptor; for H.264 it is the packet after a marker, or the first
    /// of a new timestamp.
    private func startsFrame(at sequence: Int64) -> Bool {
        switch codec {
        case .vp8: return slot(sequence).startsFrame
        case .h264:
            if present(sequence - 1) { return slot(sequence - 1).marker || slot(sequence - 1).timestamp != slot(sequence).timestamp }
            if let lastFrameTimestamp { return slot(sequence).timestamp != lastFrameTimestamp }
            return slot(sequence).startsKeyframe
        }
    }

    /// Moves `next` to `end`, counting the packets held before it as discarded.
    private mutating func discard(upTo end: Int64) {
        guard let first = next, end > first else { return }
        // Past `capacity` packets every slot has been reused: look at each slot once.
        for sequence in max(first, end - Int64(settings.capacity))..<end where present(sequence) {
            counters.discarded += 1
        }
        next = end
    }

    /// A packet the next frame needs is absent: make sure it is waited for (asked
    /// for and timed), even if it went missing while nothing was tracked, such as
    /// a hole in a keyframe held while an earlier loss was given up.
    private mutating func awaitPacket(_ sequence: Int64, now: Double) {
        guard !missing.contains(where: { $0.sequence == sequence }) else { return }
        missing.append(Missing(sequence: sequence, since: now, lastNack: -.infinity, tries: 0))
    }

    /// When the oldest missing packet has waited past the bound: the packets
    /// that waited too long are lost for good, so everything up to the last of
    /// them is dropped, and a keyframe after it is sought. True when it gave up.
    private mutating func giveUpOnLost(now: Double, feedback: inout FeedbackRequests) -> Bool {
        guard let oldest = missing.first, now - oldest.since > settings.maxWait else { return false }
        // The last of those that waited too long, found without making an array.
        let lost = missing.reduce(oldest.sequence) { now - $1.since > settings.maxWait ? max($0, $1.sequence) : $0 }
        discard(upTo: lost + 1)
        missing.removeAll { $0.sequence <= lost }
        giveUp(now: now, feedback: &feedback, keepingMissing: true)
        seekKeyframe()
        return true
    }

    /// A packet is lost for good: drop the frames that need it, ask for a keyframe.
    private mutating func giveUp(now: Double, feedback: inout FeedbackRequests, keepingMissing: Bool = false) {
        counters.framesDropped += 1
        if !keepingMissing { missing.removeAll(keepingCapacity: true) }
        waitingForKeyframe = true
        requestKeyframe(now: now, feedback: &feedback)
    }

    /// Moves `next` to the first keyframe's first packet held, or past
    /// everything held when there is none.
    private mutating func seekKeyframe() {
        guard let first = next, first <= highest else { return }
        var sequence = first
        while sequence <= highest {
            // The same test as nextFrame's: a packet this takes that nextFrame then refused
            // would send it back here to find the same packet again, forever.
            if present(sequence), slot(sequence).startsKeyframe, startsFrame(at: sequence) {
                discard(upTo: sequence)
                missing.removeAll { $0.sequence < sequence }
                return
            }
            if present(sequence), startsFrame(at: sequence) { counters.framesDropped += 1 }   // skipped: not decodable
            sequence += 1
        }
        discard(upTo: highest + 1)
        missing.removeAll(keepingCapacity: true)
    }

    private mutating func restart(at sequence: Int64, now: Double, feedback: inout FeedbackRequests) {
        discard(upTo: sequence)
        missing.removeAll(keepingCapacity: true)
        counters.framesDropped += 1
        waitingForKeyframe = true
        requestKeyframe(now: now, feedback: &feedback)
    }

    private mutating func requestKeyframe(now: Double, feedback: inout FeedbackRequests) {
        guard now - lastPLI >= settings.pliInterval else { return }
        lastPLI = now
        counters.keyframeRequests += 1
        feedback.keyframe = true
    }

    private mutating func collectNacks(now: Double, feedback: inout FeedbackRequests) {
        if waitingForKeyframe {
            // Until a keyframe's first packet is held, what is missing is not
            // worth asking for; ask for the keyframe instead (again, now and then).
            guard let first = next, present(first), slot(first).startsKeyframe else {
                if now - lastPLI >= settings.pliInterval { requestKeyframe(now: now, feedback: &feedback) }
                return
            }
        }
        let first = next ?? 0
        for index in missing.indices where missing[index].sequence >= first && missing[index].tries < settings.maxNackTries
            && now - missing[index].lastNack >= settings.nackInterval {
            missing[index].lastNack = now
            missing[index].tries += 1
            counters.nacked += 1
            feedback.nack(UInt16(truncatingIfNeeded: missing[index].sequence))
        }
    }
}

/// What the receive path asks of the sender after a packet: sequence numbers
/// to resend, a keyframe. Kept by the caller and emptied, so asking allocates
/// nothing while nothing is lost.
package struct FeedbackRequests {
    package private(set) var nacks: [UInt16] = []
    package var keyframe = false

    package init() { nacks.reserveCapacity(64) }

    mutating func nack(_ sequence: UInt16) { nacks.append(sequence) }

    package var isEmpty: Bool { nacks.isEmpty && !keyframe }

    package mutating func clear() {
        nacks.removeAll(keepingCapacity: true)
        keyframe = false
    }
}
