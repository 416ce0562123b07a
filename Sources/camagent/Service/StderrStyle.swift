import Foundation
import SystemdSupport

/// Where stderr goes, decided once: a terminal, a file or pipe, or systemd's
/// journal (then every log line carries its syslog priority).
let stderrLogStyle = LogStyle.detect(environment: ProcessInfo.processInfo.environment)

/// "camagent: <what failed>" on stderr, filed as an error (priority 3) when
/// stderr is the journal; plain lines there are filed at journald's default, info.
func printFailure(_ text: String) {
    printError(stderrLogStyle.errorLinePrefix + "camagent: " + text)
}
