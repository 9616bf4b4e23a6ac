// swift-tools-version:6.0
import PackageDescription

/// Settings every Swift target shares: Swift 6 language mode comes with the tools version.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let argumentParser = Target.Dependency.product(name: "ArgumentParser", package: "swift-argument-parser")
let logging = Target.Dependency.product(name: "Logging", package: "swift-log")
let systemPackage = Target.Dependency.product(name: "SystemPackage", package: "swift-system")
let nioCore = Target.Dependency.product(name: "NIOCore", package: "swift-nio")
let nioPosix = Target.Dependency.product(name: "NIOPosix", package: "swift-nio")
let deque = Target.Dependency.product(name: "DequeModule", package: "swift-collections")
let coreMetrics = Target.Dependency.product(name: "CoreMetrics", package: "swift-metrics")
let prometheus = Target.Dependency.product(name: "Prometheus", package: "swift-prometheus")
let nioHTTP1 = Target.Dependency.product(name: "NIOHTTP1", package: "swift-nio")

let package = Package(
    name: "coordfs",
    platforms: [.macOS(.v15)],
    products: [
        // `coordfs` is the launcher: `exec` starts fast, everything else goes to `coordfs-full`
        // beside it (Sources/CoordFSLauncher says why). Both are installed together.
        .executable(name: "coordfs", targets: ["CoordFSLauncher"]),
        .executable(name: "coordfs-full", targets: ["coordfs"]),
        .library(name: "CoordFSClient", targets: ["CoordFSClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // libpq, loaded with dlopen only by a mount with --cluster (clibpq.c says why).
        .target(name: "CLibPQ"),
        // The libfuse shim: FUSE_USE_VERSION, static inline wrappers, and the INIT patch that
        // asks for shared mappings of direct-I/O files (cfuse.c).
        .target(
            name: "CFuse",
            linkerSettings: [.linkedLibrary("fuse3")]
        ),
        // Linux calls and constants Swift's Glibc module hides behind _GNU_SOURCE.
        .target(name: "CSystemCalls"),
        // The domain: paths, the node table, typed system calls on the backing. No libfuse.
        .target(
            name: "CoordFSCore",
            dependencies: ["CSystemCalls", systemPackage, logging, deque, coreMetrics],
            swiftSettings: swiftSettings
        ),
        // Several hosts as one coordinated folder: the PostgreSQL session, host grants on
        // paths, and the events table. The only module that talks to PostgreSQL; no libfuse.
        .target(
            name: "CoordFSCluster",
            dependencies: ["CLibPQ", "CoordFSCore", systemPackage, logging],
            swiftSettings: swiftSettings
        ),
        // The system's SQLite 3 (libsqlite3-dev), for the version store's index.
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        // The version store (`--versions`): kept versions in the backing and their index in
        // SQLite. The only module that talks to SQLite; no libfuse.
        .target(
            name: "CoordFSVersions",
            dependencies: ["CoordFSCore", "CSQLite", logging],
            swiftSettings: swiftSettings
        ),
        // The only module that touches libfuse (and the protocol module for the value of the
        // attribute that locates the control socket).
        .target(
            name: "CoordFSFuse",
            dependencies: ["CFuse", "CoordFSCore", "CoordFSProtocol", systemPackage, logging, coreMetrics],
            swiftSettings: swiftSettings
        ),
        // Wire types of the control socket and their line framing: shared by server and client
        // (paths as swift-system's FilePath, exact bytes on Linux).
        .target(
            name: "CoordFSProtocol",
            dependencies: [systemPackage],
            swiftSettings: swiftSettings
        ),
        // The control socket server (SwiftNIO): sessions, routing to claims, events and presenters.
        .target(
            name: "CoordFSServer",
            dependencies: ["CoordFSCore", "CoordFSProtocol", systemPackage, nioCore, nioPosix, logging],
            swiftSettings: swiftSettings
        ),
        // The optional Prometheus endpoint (--metrics): the swift-metrics backend, the series
        // read at scrape time, and a small HTTP/1.1 server on loopback. Nothing of FUSE.
        .target(
            name: "CoordFSMetrics",
            dependencies: ["CoordFSCore", coreMetrics, prometheus, nioCore, nioPosix, nioHTTP1, logging],
            swiftSettings: swiftSettings
        ),
        // The public Swift client library: knows the protocol, nothing of FUSE or the core
        // (CSystemCalls only for getxattr, which Swift's Glibc module hides).
        .target(
            name: "CoordFSClient",
            dependencies: ["CoordFSProtocol", "CSystemCalls", systemPackage, nioCore, nioPosix, deque],
            swiftSettings: swiftSettings
        ),
        // What a short command needs without the daemon: `exec`'s request and its run, the
        // child process, exact arguments, one-line messages. Shared by both executables.
        .target(
            name: "CoordFSExec",
            dependencies: ["CoordFSClient", "CSystemCalls", argumentParser, systemPackage],
            swiftSettings: swiftSettings
        ),
        // The `coordfs` program people run: `exec` itself, the rest handed to coordfs-full.
        // Release builds link everything in, the C library too: no dynamic loader, no
        // relocations, so a whole `exec` costs little more than flock(1) (Docs/PERFORMANCE.md).
        .executableTarget(
            name: "CoordFSLauncher",
            dependencies: ["CoordFSExec"],
            swiftSettings: swiftSettings,
            linkerSettings: [.unsafeFlags(["-static-executable", "-l_FoundationCShims", "-l_FoundationCollections"],
                                          .when(configuration: .release))]
        ),
        // coordfs-full: every command (mount and the daemon, unmount, watch, exec, status).
        .executableTarget(
            name: "coordfs",
            dependencies: ["CoordFSFuse", "CoordFSCore", "CoordFSServer", "CoordFSClient", "CoordFSProtocol", "CoordFSMetrics", "CoordFSCluster",
                           "CoordFSVersions", "CoordFSExec", argumentParser, logging, systemPackage],
            swiftSettings: swiftSettings,
            // Release builds start faster (a short command such as `coordfs exec` is mostly its
            // start: Docs/PERFORMANCE.md): the Swift runtime and libraries linked in, so the
            // dynamic loader maps five libraries rather than sixteen and resolves 2,000 symbols
            // rather than 5,400; and the relative relocations packed (RELR, by the toolchain's
            // lld), so it reads 10 KiB of them rather than 1.3 MiB. Linking alone must name the
            // libraries that FoundationEssentials' static archive needs.
            linkerSettings: [.unsafeFlags(["-static-stdlib", "-l_FoundationCShims", "-l_FoundationCollections",
                                           "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"],
                                          .when(configuration: .release))]
        ),
        // What the server and integration tests share: a plain line client for the control
        // socket and the seeded garbage lines of the fuzz tests.
        .target(
            name: "CoordFSTestSupport",
            dependencies: ["CoordFSProtocol"],
            path: "Tests/CoordFSTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoordFSCoreTests",
            dependencies: ["CoordFSCore", "CoordFSTestSupport", systemPackage],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoordFSClusterTests",
            dependencies: ["CoordFSCluster", "CoordFSCore", "CoordFSTestSupport", logging],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoordFSVersionsTests",
            dependencies: ["CoordFSVersions", "CoordFSCluster", "CoordFSCore", "CoordFSTestSupport", logging],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoordFSProtocolTests",
            dependencies: ["CoordFSProtocol", systemPackage],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoordFSServerTests",
            dependencies: ["CoordFSServer", "CoordFSClient", "CoordFSProtocol", "CoordFSCore", "CoordFSTestSupport", systemPackage, nioCore, nioPosix, logging],
            swiftSettings: swiftSettings
        ),
        // The command line's own logic, run in-process (no mount).
        .testTarget(
            name: "CoordFSCommandTests",
            dependencies: ["coordfs", "CoordFSExec", argumentParser],
            swiftSettings: swiftSettings
        ),
        // The --metrics address rules and the HTTP endpoint, without a mount.
        .testTarget(
            name: "CoordFSMetricsTests",
            dependencies: ["CoordFSMetrics", "CoordFSTestSupport", prometheus, logging],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["CoordFSCore", "CoordFSClient", "CoordFSProtocol", "CoordFSTestSupport", systemPackage],
            // The Python scripts the tests run, found from #filePath (Harness.swift): not resources.
            exclude: ["Scripts"],
            swiftSettings: swiftSettings
        ),
    ]
)
