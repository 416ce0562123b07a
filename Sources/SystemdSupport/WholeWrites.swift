#if canImport(Glibc)
import Glibc
#endif

/// Writes all of `text` on `fd` with write(2), unbuffered. One write can take less than it
/// was given, or nothing (EAGAIN), when the descriptor is non-blocking: a parent that shares
/// its pipe may have made it so. The rest follows once the reader makes room, however long
/// that takes, or a JSON line would be cut or lost: only the output thread (`OutputQueue`)
/// calls this, and nothing waits for it. Any other error (a reader that went away) ends it.
func writeWhole(_ fd: Int32, _ text: String) {
    var text = text
    text.withUTF8 { bytes in
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let written = write(fd, base + offset, bytes.count - offset)
            if written > 0 {
                offset += written
            } else if written < 0 && errno == EINTR {
                continue
            } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                var room = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                guard poll(&room, 1, -1) >= 0 || errno == EINTR else { return }
            } else {
                return
            }
        }
    }
}
