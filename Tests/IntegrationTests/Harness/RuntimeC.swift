import Foundation

/// libExtensionRuntimeC for the tests: built once per test run by scripts/build-runtime-c.sh
/// (the system C compiler) into .build/runtime-c, as scripts/test.sh and scripts/install.sh do.
enum RuntimeC {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path
    static let directory = packageRoot + "/.build/runtime-c"

    /// The outcome of the one build: the library's path, or why it failed.
    private static let built: Result<String, HarnessError> = {
        do {
            let r = try runProgram("/bin/bash", [packageRoot + "/scripts/build-runtime-c.sh", "--out", directory])
            guard r.status == 0 else { return .failure(HarnessError("scripts/build-runtime-c.sh failed: \(r.err)")) }
            return .success(directory + "/libExtensionRuntimeC.so")
        } catch {
            return .failure(HarnessError("cannot run scripts/build-runtime-c.sh: \(error)"))
        }
    }()

    /// The path of libExtensionRuntimeC.so (the link-time name), building it on first use.
    static func library() throws -> String { try built.get() }

    /// The compiler and linker arguments that build a C extension against it.
    static func flags() throws -> [String] {
        _ = try library()
        return ["-I", packageRoot + "/include", "-L", directory, "-lExtensionRuntimeC", "-Wl,-rpath," + directory]
    }
}
