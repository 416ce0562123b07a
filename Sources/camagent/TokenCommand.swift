import ArgumentParser
import SessionServer

/// `camagent token`: mints a token offline from the router's secret file
/// and prints it alone on stdout. Never creates the secret.
struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Mint a router token: a project token (--project) or a client token for a session and role.",
        discussion: """
        camagent token --secret-file F --project [--expire-in S]
        camagent token --secret-file F --session SID --role R [--expire-in S] [--data D]
        Roles: subscriber, publisher, publisher-only, moderator. Tokens live 24 h by default, 30 days at most.
        Exit codes: 64 bad command line, 78 the secret file is missing or unreadable.
        """)

    @Option(help: "The router's secret file (never created here).")
    var secretFile = "./camagent-router.secret"

    @Flag(help: "A project token: for the REST calls that make sessions and tokens.")
    var project = false

    @Option(help: "The session a client token is for.")
    var session: String?

    @Option(help: "The client token's role: subscriber, publisher, publisher-only or moderator.")
    var role: String?

    // Unconditional: "-5" is read as the number it is, so the range is what the error names.
    @Option(parsing: .unconditional, help: "Seconds until the token expires (1 to 2592000, 30 days).")
    var expireIn = TokenAuthority.defaultLifetime

    @Option(help: "Connection data the other clients see (at most 1000 characters).")
    var data: String?

    func validate() throws {
        guard project != (session != nil) else {
            throw ValidationError("give either --project or --session SID (with --role)")
        }
        if project, role != nil || data != nil {
            throw ValidationError("--role and --data are for client tokens (--session), not --project")
        }
        if session != nil {
            guard let role else { throw ValidationError("--session needs --role (\(roleNames))") }
            guard Role(rawValue: role) != nil else {
                throw ValidationError("unknown role \"\(role)\"; the roles are \(roleNames)")
            }
        }
        guard (1...TokenAuthority.maxLifetime).contains(expireIn) else {
            throw ValidationError("--expire-in takes 1 to \(TokenAuthority.maxLifetime) seconds (30 days)")
        }
        if let data, data.count > TokenAuthority.maxConnectionDataLength {
            throw ValidationError("--data is \(data.count) characters long; at most \(TokenAuthority.maxConnectionDataLength) are allowed")
        }
    }

    private var roleNames: String { Role.allCases.map(\.rawValue).joined(separator: ", ") }

    func run() throws {
        let secret = try readRouterSecret(at: secretFile)
        let authority = TokenAuthority(secret: secret)
        let (project, session, role, data, expireIn) = (project, session, role.flatMap(Role.init(rawValue:)), data ?? "", expireIn)
        let minted: Result<String, TokenError>
        do {
            minted = try blockingAwait(timeout: 30) {
                do throws(TokenError) {
                    if project { return .success(try await authority.makeProjectToken(expireIn: expireIn)) }
                    return .success(try await authority.makeClientToken(
                        sessionID: session!, role: role!, connectionData: data, expireIn: expireIn))
                } catch {
                    return .failure(error)
                }
            }
        } catch {
            printError("camagent: minting the token \(error)")
            throw ExitCode(ExitCodes.driverError)
        }
        switch minted {
        case .success(let token): printLine(token)
        case .failure(let error):
            // What validate() cannot see: a session id that is not one.
            printError("camagent: \(error)")
            throw ExitCode(ExitCodes.usage)
        }
    }
}
