// swift-tools-version: 6.0
// camagent: a camera capture and publishing agent for Linux.
// Targets are split by concern (see README "Layout"); C libraries are reached
// only through the thin shim modules in CModules/.
import PackageDescription

// The per-packet path (sockets, ICE, SRTP, RTP in and out, the router's fan-out) crosses these
// modules for every packet. Release builds let the optimizer inline and specialise across them, and
// drop the run-time exclusivity checks on their class properties (debug and sanitizer builds keep
// them). Measured on the router with one subscriber: about 8 % less CPU per forwarded packet
// (BENCHMARKS.md, "Router forwarding").
let perPacketPath: [SwiftSetting] = [
    .unsafeFlags(["-cross-module-optimization", "-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "camagent",
    products: [
        .executable(name: "camagent", targets: ["camagent"]),
        .library(name: "MediaTypes", targets: ["MediaTypes"]),
        .library(name: "VideoSources", targets: ["VideoSources"]),
        .library(name: "AudioDevices", targets: ["AudioDevices"]),
        .library(name: "RTP", targets: ["RTP"]),
        .library(name: "Networking", targets: ["Networking"]),
        .library(name: "ICE", targets: ["ICE"]),
        .library(name: "SDP", targets: ["SDP"]),
        .library(name: "Encoders", targets: ["Encoders"]),
        .library(name: "SecureTransport", targets: ["SecureTransport"]),
        .library(name: "WHIP", targets: ["WHIP"]),
        .library(name: "Publisher", targets: ["Publisher"]),
        .library(name: "ViewerServer", targets: ["ViewerServer"]),
        .library(name: "SessionServer", targets: ["SessionServer"]),
        .library(name: "Subscriber", targets: ["Subscriber"]),
        .library(name: "Session", targets: ["Session"]),
        .library(name: "SystemdSupport", targets: ["SystemdSupport"]),
        .library(name: "Captions", targets: ["Captions"]),
        .library(name: "AgentConfiguration", targets: ["AgentConfiguration"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        // Hummingbird's own dependency, named for ViewerServer's graceful shutdown.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.0.0"),
        // Hummingbird's own dependency, named for the router's refusal of a WebSocket upgrade (an HTTP
        // response written on the upgrading channel, see SignallingUpgrade.swift).
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.0.0"),
        // Already in the graph through Hummingbird: its HTTPRequestPart, for the body deadline.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.20.0"),
        // HTTP's types, which Hummingbird's pipeline speaks (already in the graph through it).
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
        // The router: WebSocket signalling on the Hummingbird server, JWT tokens (HS256).
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.0.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.0.0"),
        // The router's HTTPS (--tls-cert, --tls-self-signed): NIOSSL through HummingbirdTLS, and
        // the self-signed certificate made with swift-certificates and swift-crypto (both already
        // in the graph through jwt-kit).
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.27.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "4.0.0"..<"6.0.0"),
        // The configuration file (/etc/camagent/camagent.toml): TOML through toml++.
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
    ],
    targets: [
        // MARK: C shims (one per C library; only what Swift cannot import)
        .target(
            name: "CV4L2",
            path: "CModules/CV4L2",
            linkerSettings: [.linkedLibrary("v4l2")]
        ),
        .target(
            name: "CYUV",
            path: "CModules/CYUV",
            linkerSettings: [.linkedLibrary("yuv")]
        ),
        .target(
            name: "CTurboJPEG",
            path: "CModules/CTurboJPEG",
            linkerSettings: [.linkedLibrary("turbojpeg")]
        ),
        .target(
            name: "CLinux",
            path: "CModules/CLinux"
        ),
        .target(
            name: "COpenSSL",
            path: "CModules/COpenSSL",
            linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]
        ),
        .target(
            name: "CVPX",
            path: "CModules/CVPX",
            linkerSettings: [.linkedLibrary("vpx")]
        ),
        .target(
            name: "COpenH264",
            path: "CModules/COpenH264",
            linkerSettings: [.linkedLibrary("openh264")]
        ),
        .target(
            name: "COpus",
            path: "CModules/COpus",
            linkerSettings: [.linkedLibrary("opus")]
        ),
        .target(
            name: "CSRTP",
            path: "CModules/CSRTP",
            linkerSettings: [.linkedLibrary("srtp2")]
        ),
        .target(
            name: "CALSA",
            path: "CModules/CALSA",
            linkerSettings: [.linkedLibrary("asound")]
        ),

        // MARK: Swift libraries by concern
        // Frames, formats, clocks, the audio bus and the OpenTok-shaped capture protocols (video and audio).
        .target(name: "MediaTypes", dependencies: ["CLinux"], swiftSettings: perPacketPath),
        // Pixel conversion to and from NV12 (libyuv, libjpeg-turbo), test-pattern drawing.
        .target(name: "PixelConversion", dependencies: ["MediaTypes", "CYUV", "CTurboJPEG"]),
        // Video sources: the V4L2 capturer, the test pattern, the frame-rate governor.
        .target(
            name: "VideoSources",
            dependencies: [
                "MediaTypes", "PixelConversion", "CV4L2",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Audio devices: the ALSA capture/render driver, the silent fallback.
        .target(
            name: "AudioDevices",
            dependencies: [
                "MediaTypes", "CALSA",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Network byte order helpers shared by the wire formats.
        .target(name: "WireFormat", swiftSettings: perPacketPath),
        // RTP and RTCP packets, payloaders (VP8, H.264, Opus) and depacketizers.
        .target(name: "RTP", dependencies: ["WireFormat"], swiftSettings: perPacketPath),
        // Sockets and addresses: UDP sockets, transport addresses, the host's interfaces.
        .target(name: "Networking", dependencies: ["CLinux"], swiftSettings: perPacketPath),
        // ICE (RFC 8445): STUN messages and the sans-IO agent (full and lite).
        .target(
            name: "ICE",
            dependencies: ["Networking", "WireFormat", "COpenSSL", .product(name: "Logging", package: "swift-log")],
            swiftSettings: perPacketPath
        ),
        // SDP offers and answers for WHIP/WHEP: codecs, ICE candidates, fingerprints.
        .target(name: "SDP"),
        // What OpenSSL's callers share: its error queue as text.
        .target(name: "OpenSSLSupport", dependencies: ["COpenSSL"]),
        // DTLS-SRTP: the DTLS 1.2 handshake and SRTP/SRTCP (RFC 3711, RFC 7714), both over OpenSSL.
        .target(name: "SecureTransport", dependencies: ["MediaTypes", "WireFormat", "COpenSSL", "OpenSSLSupport"], swiftSettings: perPacketPath),
        // Video and audio encoders for the publisher: VP8 (libvpx), H.264 (OpenH264), Opus (libopus).
        .target(name: "Encoders", dependencies: ["MediaTypes", "CVPX", "COpenH264", "COpus", "CYUV"]),
        // WHIP (RFC 9725): a small blocking HTTP/1.1 client over POSIX sockets, TLS by OpenSSL; the publisher's WHIP signalling.
        .target(
            name: "WHIP",
            dependencies: ["MediaTypes", "Publisher", "COpenSSL", "OpenSSLSupport", .product(name: "Logging", package: "swift-log")]
        ),
        // The WebRTC publisher: encoders → RTP → pacer → SRTP over ICE, WHIP signaling, stats.
        .target(
            name: "Publisher",
            dependencies: [
                "MediaTypes", "PixelConversion", "Encoders", "RTP", "Networking", "ICE", "SDP", "SecureTransport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: perPacketPath
        ),
        // The receiving half: WHEP client, jitter buffer, decoders, renderers (issue 14).
        .target(
            name: "Subscriber",
            dependencies: [
                "MediaTypes", "Encoders", "RTP", "SDP", "SecureTransport", "Networking", "Publisher", "WHIP", "MediaFiles",
                "PixelConversion", "VideoSources", "AudioDevices",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A client of a router session: the signalling WebSocket, its events, subscribing (issue 14).
        .target(
            name: "Session",
            dependencies: ["MediaTypes", "WHIP", "Publisher", "Subscriber", .product(name: "Logging", package: "swift-log")]
        ),
        // The embedded viewer's routes, mounted on the in-process router: viewer page, WHEP, /stats, /metrics.
        .target(
            name: "ViewerServer",
            dependencies: [
                "HTTPLimits", "SessionServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The router: sessions, tokens (JWT), REST, WebSocket signalling, and routed media through a
        // `SessionMediaEngine` the caller passes in (Hummingbird, hummingbird-websocket, jwt-kit).
        .target(
            name: "SessionServer",
            dependencies: [
                "HTTPLimits", "MediaTypes", "SDP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // The frame type, to tell a closed signalling socket from a broken one (CloseFrameWatcher).
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Running under systemd: sd_notify (READY, STATUS, WATCHDOG, STOPPING) without libsystemd,
        // the frame-driven watchdog, and log lines that suit a terminal and journald.
        .target(
            name: "SystemdSupport",
            dependencies: ["MediaTypes", .product(name: "Logging", package: "swift-log")]
        ),
        // Live captions: Opus to 16 kHz, utterances by voice activity, speech to text by whisper.cpp
        // through a bridge loaded at run time (CModules/WhisperBridge, built by scripts/install-captions).
        .target(
            name: "Captions",
            dependencies: ["MediaTypes", "Encoders", .product(name: "Logging", package: "swift-log")]
        ),
        // The HTTP servers' limits (viewer and router): connections, header sizes, slow and idle clients.
        .target(
            name: "HTTPLimits",
            dependencies: [
                .product(name: "HummingbirdCore", package: "hummingbird"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"), .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The configuration file: TOML sections of command options, checked against each command's options.
        .target(name: "AgentConfiguration", dependencies: [.product(name: "TOMLKit", package: "TOMLKit")]),
        // Media files: Y4M and WAV writers/readers.
        // The router's HTTPS: its certificate and key (loaded, or made self-signed) and the TLS layer
        // (NIOSSL through HummingbirdTLS), kept apart so SessionServer links no TLS library.
        .target(
            name: "SessionServerTLS",
            dependencies: [
                "SessionServer",
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(name: "MediaFiles", dependencies: ["MediaTypes", "PixelConversion"]),
        // The command-line agent.
        .executableTarget(
            name: "camagent",
            dependencies: [
                "MediaTypes", "PixelConversion", "VideoSources", "AudioDevices", "MediaFiles", "Encoders", "Publisher", "Networking", "WHIP",
                "ViewerServer", "SessionServer", "SessionServerTLS", "Subscriber", "Session", "SystemdSupport", "Captions",
                "AgentConfiguration",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Tests (host unit tests; device tests live in Tests/Device and run in the VM)
        // Helpers more than one test target uses.
        .target(name: "TestSupport", dependencies: [.product(name: "Logging", package: "swift-log")], path: "Tests/TestSupport"),
        .testTarget(name: "MediaTypesTests", dependencies: ["MediaTypes"]),
        .testTarget(name: "AgentConfigurationTests", dependencies: ["AgentConfiguration"]),
        .testTarget(name: "RTPTests", dependencies: ["RTP"]),
        .testTarget(name: "NetworkingTests", dependencies: ["Networking", "TestSupport"]),
        .testTarget(name: "ICETests", dependencies: ["ICE", "Networking", "TestSupport", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "SDPTests", dependencies: ["SDP"]),
        .testTarget(
            name: "PublisherTests",
            dependencies: ["Publisher", "RTP", "MediaTypes", "SecureTransport", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        // libsrtp2 (CSRTP) is the reference the SRTP tests check camagent's own SRTP against.
        .testTarget(name: "SecureTransportTests", dependencies: ["SecureTransport", "RTP", "CSRTP"]),
        .testTarget(
            name: "WHIPTests",
            dependencies: ["WHIP", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(name: "EncodersTests", dependencies: ["Encoders", "MediaTypes", "PixelConversion", "RTP"]),
        .testTarget(name: "PixelConversionTests", dependencies: ["PixelConversion", "MediaTypes"]),
        .testTarget(
            name: "VideoSourcesTests",
            dependencies: ["VideoSources", "MediaTypes", "PixelConversion", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "AudioDevicesTests",
            dependencies: ["AudioDevices", "MediaTypes", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "ViewerServerTests",
            dependencies: ["ViewerServer", "SessionServer", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "SessionServerTests",
            dependencies: [
                "SessionServer", "TestSupport",
                .product(name: "JWTKit", package: "jwt-kit"),   // hand-made tokens
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "SessionServerTLSTests", dependencies: ["SessionServerTLS"]),
        .testTarget(name: "SubscriberTests", dependencies: ["Subscriber", "Session", "WHIP", "RTP", "SDP", "Publisher", "AudioDevices", "VideoSources", "MediaTypes",
                                                       "Encoders", "PixelConversion", .product(name: "Logging", package: "swift-log")]),
        .testTarget(
            name: "SystemdSupportTests",
            dependencies: ["SystemdSupport", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(name: "MediaFilesTests", dependencies: ["MediaFiles", "MediaTypes", "PixelConversion"]),
        .testTarget(
            name: "CaptionsTests",
            dependencies: ["Captions", "Encoders", "MediaTypes", "MediaFiles", .product(name: "Logging", package: "swift-log")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
