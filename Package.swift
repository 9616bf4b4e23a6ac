// swift-tools-version:6.0
import PackageDescription

/// Settings every Swift target shares: Swift 6 language mode comes with the tools version.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let argumentParser = Target.Dependency.product(name: "ArgumentParser", package: "swift-argument-parser")
let logging = Target.Dependency.product(name: "Logging", package: "swift-log")
let systemPackage = Target.Dependency.product(name: "SystemPackage", package: "swift-system")

let package = Package(
    name: "coordfs",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "coordfs", targets: ["coordfs"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
    ],
    targets: [
        // The libfuse shim: FUSE_USE_VERSION and static inline wrappers, nothing else.
        .target(
            name: "CFuse",
            linkerSettings: [.linkedLibrary("fuse3")]
        ),
        // Linux calls and constants Swift's Glibc module hides behind _GNU_SOURCE.
        .target(name: "CSystemCalls"),
        // The domain: paths, the node table, typed system calls on the backing. No libfuse.
        .target(
            name: "CoordFSCore",
            dependencies: ["CSystemCalls", systemPackage, logging],
            swiftSettings: swiftSettings
        ),
        // The only module that touches libfuse.
        .target(
            name: "CoordFSFuse",
            dependencies: ["CFuse", "CoordFSCore", systemPackage, logging],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "coordfs",
            dependencies: ["CoordFSFuse", "CoordFSCore", argumentParser, logging, systemPackage],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoordFSCoreTests",
            dependencies: ["CoordFSCore", systemPackage],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["CoordFSCore", systemPackage],
            swiftSettings: swiftSettings
        ),
    ]
)
