#if canImport(Glibc)
import Glibc
#endif

/// Writes all of `text` on `fd` with write(2), unbuffered. One write can take less than it
/// was given, or nothing (EAGAIN), when the descriptor is non-blocking: a parent that shares
/// its pipe may have made it so. The rest follows once the reader makes room, however long
/// that takes, or a JSON line would be cut or lost: only the output thread (`OutputQueue`)
/// calls this, and nothing waits for it. Any other error (EPIPE: the reader went away; SIGPIPE
/// is ignored) ends it: false, and the descriptor is not written again.
func writeWhole(_ fd: Int32, _ text: String) -> Bool {
    var text = text
    return text.withUTF8 { bytes -> Bool in
        guard let base = bytes.baseAddress else { return true }
        var offset = 0
        while offset < bytes.count {
            let written = write(fd, base + offset, bytes.count - offset)
            if written > 0 {
                offset += written
            } else if written < 0 && errno == EINTR {
                continue
            } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                var room = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                guard poll(&room, 1, -1) >= 0 || errno == EINTR else { return false }
            } else {
                return false
            }
        }
        return true
    }
}
