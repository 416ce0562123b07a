import ArgumentParser
import Foundation

/// `--tls-ca FILE` of the client commands (publish, subscribe, session create),
/// checked before any connection: a file that cannot be read or holds no PEM
/// certificate is this machine's problem (78), not an unreachable server (80).
func checkTrustedCertificatesFile(_ path: String?) throws {
    guard let path else { return }
    let text: String
    do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
        let reason = access(path, R_OK) == 0 ? "not text" : String(cString: strerror(errno))
        printError("camagent: --tls-ca \(path): cannot be read (\(reason))")
        throw ExitCode(ExitCodes.secretFileError)
    }
    guard text.contains("-----BEGIN CERTIFICATE-----") else {
        printError("camagent: --tls-ca \(path): no PEM certificate in it (-----BEGIN CERTIFICATE-----)")
        throw ExitCode(ExitCodes.secretFileError)
    }
}
