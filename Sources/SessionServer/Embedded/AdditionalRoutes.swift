import Hummingbird

/// Routes a server mounts beside the router's own. `camagent publish` runs
/// the router in-process and mounts its viewer routes (the single-stream
/// viewer page, `/whep`, `/stats`, `/cameras/N/`), so links and tools made
/// for them go on working on the one server.
public protocol AdditionalRoutes: Sendable {
    /// The response to a request outside `/v2/`, or nil to let the router
    /// answer it (its session page at `/?session=…`, its `/metrics`).
    /// `routerMetrics` renders the router's own Prometheus text, for routes
    /// that serve metrics of their own and add the router's.
    func respond(to request: Request, context: BasicRequestContext,
                 routerMetrics: @escaping @Sendable () -> String) async throws -> Response?
}
