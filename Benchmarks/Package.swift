// swift-tools-version:6.1
//
// The performance suite of extensiond (see docs/performance.md). A package of its own, so the
// main build does not pay for it; it depends on the root package by path.
//
//   swift build -c release --package-path Benchmarks --product extensiond   # the daemon under test
//   swift build -c release --package-path Benchmarks                         # the suite
//   Benchmarks/.build/release/extensiond-bench [--quick]
//
// Or simply ./scripts/bench.sh [--quick].
import PackageDescription

let package = Package(
    name: "extensiond-benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        // `name:` pins the identity: a path dependency is otherwise named after the checkout's directory.
        .package(name: "extensiond", path: ".."),
    ],
    targets: [
        // posix_spawn flags, waitid, pidfd, and an sd-bus client/service (libsystemd) for the D-Bus baseline.
        .target(name: "CBenchShims", linkerSettings: [.linkedLibrary("systemd")]),

        // The extension every figure uses: answers a 1-byte ping, runs assertion loops on command.
        .target(
            name: "BenchExtensionKit",
            dependencies: [.product(name: "ExtensionRuntime", package: "extensiond")]),
        // Statically linked Swift runtime and Foundation: no dynamic loading of libswiftCore,
        // libFoundation* and ICU at each launch (see docs/performance.md, "cold launch").
        .executableTarget(
            name: "bench-extension", dependencies: ["BenchExtensionKit"],
            linkerSettings: [.unsafeFlags(["-static-stdlib", "-l_FoundationCShims", "-l_FoundationCollections"])]),
        // The same program, dynamically linked: measured side by side to document the choice.
        .executableTarget(name: "bench-extension-dynamic", dependencies: ["BenchExtensionKit"]),

        // The driver: starts the real daemon, measures every figure and its baseline, prints the table.
        .executableTarget(
            name: "extensiond-bench",
            dependencies: [
                "CBenchShims", .product(name: "ExtensionHost", package: "extensiond"),
                .product(name: "ExtensionStatus", package: "extensiond"), .product(name: "SupervisorCore", package: "extensiond"),
            ]),
    ]
)
