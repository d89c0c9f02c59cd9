// swift-tools-version:6.1
//
// extensiond: a process lifecycle supervisor for Linux extension programs.
//
// Layout (see docs/architecture.md):
//   ExtensionProtocol  pure wire format (no dependencies, no system calls)
//   ExtensionStatus    the JSON documents of docs/json.md: Codable types and their writer (no dependencies)
//   SupervisorCore     pure lifecycle/assertion/policy state machine (no system calls, time injected)
//   ExtensionTransport sockets, descriptor passing, peer credentials (thin syscall layer)
//   SupervisorShell    the daemon's event loop (sd-event), spawning, signals, control server
//   ExtensionRuntime   linked into extension processes
//   ExtensionHost      linked into host processes
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "extensiond",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "extensiond", targets: ["extensiond"]),
        .executable(name: "extctl", targets: ["extctl"]),
        .executable(name: "extensiond-transfer", targets: ["extensiond-transfer"]),
        .library(name: "ExtensionRuntime", targets: ["ExtensionRuntime"]),
        .library(name: "ExtensionHost", targets: ["ExtensionHost"]),
        .library(name: "ExtensionStatus", targets: ["ExtensionStatus"]),
        // For the performance suite (Benchmarks/), which times the core's transitions in process.
        .library(name: "SupervisorCore", targets: ["SupervisorCore"]),
        // The C ABI of the runtime (include/extension_runtime.h, pkg-config extension-runtime) is
        // not a SwiftPM product: libExtensionRuntimeC is a C library (runtime-c/) built by
        // scripts/build-runtime-c.sh, with no Swift runtime in it.
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // HeapModule only: the supervisor's deadline heap (SupervisorCore/RecordIndex.swift).
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
    ],
    targets: [
        // C shims for what Glibc does not expose to Swift (ucred, CMSG_*, posix_spawn flags, pidfd),
        // and the extensions' sandbox (namespaces, mounts, and a seccomp filter built with libseccomp).
        .target(name: "CShims", path: "Sources/CShims", linkerSettings: [.linkedLibrary("seccomp"), .linkedLibrary("acl")]),
        // The daemon's D-Bus calls (logind's LockedHint, org.freedesktop.Application, transient
        // services), with sd-bus: linked into the daemon only, never into the runtimes.
        .target(name: "CBus", path: "Sources/CBus", linkerSettings: [.linkedLibrary("systemd")]),
        // libsodium: the secret store's AEAD (XChaCha20-Poly1305) and its guarded key memory.
        .systemLibrary(name: "CSodium", path: "Sources/CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(
            name: "CSystemd", path: "Sources/CSystemd", pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]),

        .target(name: "ExtensionProtocol", swiftSettings: strict),
        // The status, list, event and reload documents (docs/json.md): written by the daemon,
        // decoded by extctl and other clients. No Foundation, no system calls.
        .target(name: "ExtensionStatus", swiftSettings: strict),
        .target(
            name: "SupervisorCore",
            dependencies: ["ExtensionProtocol", .product(name: "HeapModule", package: "swift-collections")],
            swiftSettings: strict),
        .target(name: "ExtensionTransport", dependencies: ["CShims", "ExtensionProtocol"], swiftSettings: strict),
        // The daemon's one kernel boundary: LinuxKernel, the sd-event loop, sd_notify and the
        // journal. The only code of the daemon that calls libc, libsystemd or the C shims.
        .target(
            name: "SupervisorKernel",
            dependencies: [
                "SupervisorCore", "ExtensionTransport", "CShims", "CSystemd", "CBus", "CSodium",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        // The daemon's imperative shell: it reaches the kernel only through `Kernel`
        // (scripts/check-kernel-boundary.sh fails the tests if a file here imports Glibc).
        .target(
            name: "SupervisorShell",
            dependencies: [
                "SupervisorCore", "SupervisorKernel", "ExtensionTransport", "ExtensionProtocol", "ExtensionStatus",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        .target(name: "ExtensionRuntime", dependencies: ["ExtensionTransport", "ExtensionProtocol"], swiftSettings: strict),
        .target(name: "ExtensionHost", dependencies: ["ExtensionTransport", "ExtensionProtocol"], swiftSettings: strict),

        .executableTarget(
            name: "extensiond",
            dependencies: [
                "SupervisorShell", "SupervisorKernel", "SupervisorCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict,
            // The Swift runtime, FoundationEssentials and Dispatch linked in statically: only the
            // parts of them the daemon uses are linked in, so it does not keep whole shared
            // libraries resident, and the dynamic loader has less to do at each start. The static
            // FoundationEssentials needs the three libraries after -static-stdlib named explicitly.
            linkerSettings: [
                .unsafeFlags(["-static-stdlib", "-l_FoundationCShims", "-l_FoundationCollections", "-lswiftSynchronization"], .when(platforms: [.linux]))
            ]),
        // The transfer worker (docs/transfers.md, "The worker"): C, on libcurl and sd-event, a
        // process of its own for what parses the network's bytes.
        .executableTarget(
            name: "extensiond-transfer", path: "Sources/extensiond-transfer",
            linkerSettings: [.linkedLibrary("curl"), .linkedLibrary("systemd")]),
        .executableTarget(
            name: "extctl",
            dependencies: [
                "ExtensionHost", "ExtensionProtocol", "ExtensionStatus", "CShims",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),

        // Examples used by the demo (scripts/demo.sh) and by the integration tests.
        // Extensions link the Swift runtime and Foundation statically, the fastest launch
        // (docs/performance.md, "cold launch"): nothing for the loader to relocate at each start.
        // The README's extension template does the same. (Formatting API such as
        // String(format:) would pull in CoreFoundation and ICU, which these flags do not link.)
        .executableTarget(
            name: "stocks-widget", dependencies: ["ExtensionRuntime"], path: "examples/stocks-widget", swiftSettings: strict,
            linkerSettings: [
                .unsafeFlags(["-static-stdlib", "-l_FoundationCShims", "-l_FoundationCollections"], .when(platforms: [.linux]))
            ]),
        .executableTarget(name: "widget-panel", dependencies: ["ExtensionHost"], path: "examples/widget-panel", swiftSettings: strict),
        // A scriptable extension for the integration tests (behaviour chosen by its arguments).
        .executableTarget(
            name: "test-extension", dependencies: ["ExtensionRuntime", "ExtensionTransport", "ExtensionProtocol", "CProbes"],
            path: "Tests/Fixtures/test-extension", swiftSettings: strict),
        // Runs the daemon in the integration tests under the system unit's restrictions
        // (capability bounding set, UMask, NoNewPrivileges, RestrictSUIDSGID).
        .executableTarget(
            name: "unit-restrictions", path: "Tests/Fixtures/unit-restrictions", linkerSettings: [.linkedLibrary("seccomp")]),
        // System calls the sandbox tests try from inside the test extension.
        .target(name: "CProbes", path: "Tests/Fixtures/CProbes"),

        // libFuzzer target for the wire decoder (scripts/fuzz.sh builds it with the fuzzer runtime).
        .executableTarget(name: "wire-fuzz", dependencies: ["ExtensionProtocol"], path: "Fuzz/wire-fuzz", swiftSettings: strict),

        .testTarget(name: "ExtensionProtocolTests", dependencies: ["ExtensionProtocol"], swiftSettings: strict),
        // SupervisorShell and Logging: the randomized Simulation runs the shell's ProcessControl
        // over a simulated kernel (Support/SimulatedKernel.swift).
        .testTarget(
            name: "SupervisorCoreTests",
            dependencies: ["SupervisorCore", "SupervisorShell", "SupervisorKernel", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict),
        .testTarget(name: "ExtensionStatusTests", dependencies: ["ExtensionStatus"], swiftSettings: strict),
        // The shell's pure pieces: the JSON writer, ISO 8601 times, event JSON, the process registry file.
        .testTarget(
            name: "SupervisorShellTests",
            dependencies: ["SupervisorShell", "SupervisorKernel", "SupervisorCore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict),
        .testTarget(
            name: "IntegrationTests",
            // SupervisorCore: the manifest parser, checked against the schema (ManifestSchemaTests).
            dependencies: ["ExtensionHost", "ExtensionTransport", "ExtensionProtocol", "SupervisorCore"],
            exclude: ["systemd"],
            swiftSettings: strict),
    ]
)
