import Glibc
import Synchronization
import SystemdSupport
import TestSupport
import Testing
import Logging

@Suite("sd_notify over a real AF_UNIX datagram socket")
struct ServiceNotifierTests {
    @Test(arguments: [false, true])
    func statesArriveAsOneDatagramOfAssignments(abstract: Bool) throws {
        let manager = try NotifySocket(abstract: abstract)
        let notifier = try #require(try ServiceNotifier.fromEnvironment(["NOTIFY_SOCKET": manager.name]))
        try notifier.notify([.ready, .status("capturing /dev/video0\nat 30 fps")])
        #expect(manager.receive() == "READY=1\nSTATUS=capturing /dev/video0 at 30 fps")
        try notifier.notify(.watchdog)
        #expect(manager.receive() == "WATCHDOG=1")
        try notifier.notify(.stopping)
        #expect(manager.receive() == "STOPPING=1")
    }

    @Test func noNotifySocketMeansNoNotifier() throws {
        #expect(try ServiceNotifier.fromEnvironment([:]) == nil)
        #expect(try ServiceNotifier.fromEnvironment(["NOTIFY_SOCKET": ""]) == nil)
    }

    @Test func relativeOrOverlongAddressesAreRefused() {
        #expect(throws: ServiceNotifyError.self) { try ServiceNotifier(socketPath: "run/notify") }
        #expect(throws: ServiceNotifyError.self) { try ServiceNotifier(socketPath: "/" + String(repeating: "x", count: 200)) }
        #expect(throws: ServiceNotifyError.self) { try ServiceNotifier(socketPath: "@") }
    }

    @Test func aSocketNobodyListensOnIsASendErrorNamingIt() throws {
        let notifier = try ServiceNotifier(socketPath: "/nonexistent-dir/notify.sock")
        #expect(throws: ServiceNotifyError.send(socket: "/nonexistent-dir/notify.sock", errno: ENOENT)) {
            try notifier.notify(.ready)
        }
    }

    @Test func watchdogSettingsFromTheEnvironment() {
        let pid: Int32 = 4242
        #expect(WatchdogSettings.fromEnvironment(["WATCHDOG_USEC": "6000000"], pid: pid)?.pingInterval == .seconds(3))
        #expect(WatchdogSettings.fromEnvironment(["WATCHDOG_USEC": "6000000", "WATCHDOG_PID": "4242"], pid: pid) != nil)
        // Meant for another process (inherited environment): not ours to ping.
        #expect(WatchdogSettings.fromEnvironment(["WATCHDOG_USEC": "6000000", "WATCHDOG_PID": "1"], pid: pid) == nil)
        #expect(WatchdogSettings.fromEnvironment(["WATCHDOG_USEC": "0"], pid: pid) == nil)
        #expect(WatchdogSettings.fromEnvironment(["WATCHDOG_USEC": "soon"], pid: pid) == nil)
        #expect(WatchdogSettings.fromEnvironment([:], pid: pid) == nil)
    }
}

@Suite("Watchdog pings follow the frame path")
struct WatchdogTests {
    @Test func pingsOnlyWhenProgressMovedAndSaysSoOnceWhenItStops() {
        var gate = WatchdogGate(progress: 10)
        let interval = Duration.seconds(2)
        #expect(gate.tick(progress: 15, interval: interval) == [.watchdog])
        #expect(gate.tick(progress: 40, interval: interval) == [.watchdog])
        // Stalled: one status line, then silence (no pings) for as long as it lasts.
        let stalled = gate.tick(progress: 40, interval: interval)
        #expect(stalled.count == 1 && !stalled.contains(.watchdog))
        #expect(gate.isStalled)
        #expect(gate.tick(progress: 40, interval: interval) == [])
        #expect(gate.tick(progress: 40, interval: interval) == [])
        // Frames again: pings resume, with a status line saying so.
        let resumed = gate.tick(progress: 41, interval: interval)
        #expect(resumed.first == .watchdog && resumed.count == 2)
        #expect(!gate.isStalled)
        #expect(gate.tick(progress: 42, interval: interval) == [.watchdog])
        // After a stall, the status goes back to what it said while running.
        _ = gate.tick(progress: 42, interval: interval)
        #expect(gate.tick(progress: 43, interval: interval, runningStatus: "Publishing /dev/video0")
                == [.watchdog, .status("Frames flowing again: Publishing /dev/video0")])
    }

    @Test func theThreadPingsWhileFramesFlowAndStopsWhenTheyStop() throws {
        let manager = try NotifySocket(abstract: false)
        let notifier = try ServiceNotifier(socketPath: manager.name)
        let frames = Atomic<UInt64>(0)
        let watchdog = ProgressWatchdog(notifier: notifier, interval: .milliseconds(20), logger: Logger(label: "test"),
                                        progress: { frames.load(ordering: .relaxed) })
        defer { watchdog.stop() }
        // Frames flowing: each ping is earned by a frame the test delivers. A tick
        // that came before the test's frame says "stalled" first: skipped here.
        func nextPing() -> String? {
            var got: String?
            repeat { got = manager.receive() } while got != nil && !got!.hasPrefix("WATCHDOG=1")
            return got
        }
        // Before any frame, the first tick withholds its ping and says why (this
        // also shows the thread has read the counter's starting value).
        #expect(manager.receive()?.hasPrefix("STATUS=No frame") == true)
        for _ in 0..<3 {
            frames.add(1, ordering: .relaxed)
            #expect(nextPing() != nil)
        }
        // No frame: the next message that is not a ping is the stall status,
        // and no ping can follow it until a frame comes.
        var message: String?
        repeat { message = manager.receive() } while message?.hasPrefix("WATCHDOG=1") == true
        #expect(message?.hasPrefix("STATUS=No frame") == true)
        // Frames again: a ping comes with the status that says so.
        frames.add(1, ordering: .relaxed)
        let resumed = manager.receive()
        #expect(resumed?.hasPrefix("WATCHDOG=1\nSTATUS=Frames flowing again") == true)
    }
}
