#if canImport(Glibc)
import Glibc
#endif
internal import CLinux

/// The processors this process may run on: its CPU affinity (a kiosk may pin
/// the agent to some cores, a container may be given fewer), else every
/// online one. Work that spreads over threads (an encoder's) sizes itself by it.
public enum Processors {
    public static var usable: Int {
        let pinned = Int(CLinux_affinity_cpu_count())
        return pinned > 0 ? pinned : max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }
}
