// swift-tools-version: 6.0
// libFuzzer targets for camagent's parsers and HTTP handlers (issue 16).
// Not part of the main build: scripts/fuzz builds this package with
// `-sanitize=fuzzer,address`; each executable is one libFuzzer target.
import PackageDescription

let targets: [(name: String, dependencies: [Target.Dependency])] = [
    ("FuzzSDP", [.product(name: "SDP", package: "camagent")]),
    ("FuzzSTUN", [.product(name: "ICE", package: "camagent")]),
    ("FuzzRTP", [.product(name: "RTP", package: "camagent")]),
    ("FuzzRTCP", [.product(name: "RTP", package: "camagent")]),
    ("FuzzVP8", [.product(name: "RTP", package: "camagent")]),
    ("FuzzH264", [.product(name: "RTP", package: "camagent")]),
    ("FuzzOpus", [.product(name: "RTP", package: "camagent"), .product(name: "Encoders", package: "camagent")]),
    ("FuzzToken", [.product(name: "SessionServer", package: "camagent"), .product(name: "Crypto", package: "swift-crypto")]),
    ("FuzzSignalling", [.product(name: "SessionServer", package: "camagent")]),
    ("FuzzRouterHTTP", [
        "FuzzHTTPSupport", .product(name: "SessionServer", package: "camagent"), .product(name: "SDP", package: "camagent"),
    ]),
    ("FuzzViewerHTTP", [
        "FuzzHTTPSupport", .product(name: "ViewerServer", package: "camagent"), .product(name: "SessionServer", package: "camagent"),
        .product(name: "SDP", package: "camagent"),
    ]),
]

let package = Package(
    name: "camagent-fuzz",
    dependencies: [
        .package(name: "camagent", path: ".."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.1.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
    ],
    targets: [
        // The libFuzzer driver glue every target shares.
        .target(name: "FuzzSupport"),
        // Requests from fuzz input, through a Hummingbird responder without a socket.
        .target(
            name: "FuzzHTTPSupport",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ] + targets.map { target in
        .executableTarget(name: target.name, dependencies: ["FuzzSupport"] + target.dependencies)
    },
    swiftLanguageModes: [.v6]
)
