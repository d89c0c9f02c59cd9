import CBenchShims
import Foundation

/// The C runtime's figures (libExtensionRuntimeC): a C extension on it (bench-c-extension)
/// against a C program doing the same handshake with a plain socket loop and no runtime
/// (bench-c-raw), both built by scripts/bench.sh with cc next to this executable.
enum CRuntimeBench {
    static let extensionPath = executableDirectory + "/bench-c-extension"
    static let rawPath = executableDirectory + "/bench-c-raw"
    static var available: Bool {
        FileManager.default.isExecutableFile(atPath: extensionPath) && FileManager.default.isExecutableFile(atPath: rawPath)
    }

    /// One raw spawn + `ready` + `deliver` + ping of `executable`, in seconds.
    static func rawLaunchOnce(_ executable: String, id: String) throws -> Double {
        let t0 = now()
        let e = try RawExtension(executable: executable, id: id)
        try e.waitReady()
        try e.deliver()
        try ping(e.request)
        let t = now() - t0
        e.kill()
        return t
    }

    /// Raw launches of the C program with no runtime and of the C extension, alternated so
    /// that both see the same machine (the VM is shared): (baseline, extension).
    static func rawLaunches(iterations: Int) throws -> (Samples, Samples) {
        var baseline = Samples(), runtime = Samples()
        for i in 0..<(iterations + 2) {
            let b = try rawLaunchOnce(rawPath, id: "raw.c.\(i)")
            let r = try rawLaunchOnce(extensionPath, id: "raw.cext.\(i)")
            if i >= 2 {  // two warm-up launches (page cache)
                baseline.add(b)
                runtime.add(r)
            }
        }
        return (baseline, runtime)
    }

    /// What one process costs: its resident set (kB) while it serves a request (after one ping),
    /// then its resident set and thread count once idle again (the request channel closed and
    /// the thread count settled), averaged over `count` raw launches; and whether
    /// libFoundation, ICU or the Swift runtime was mapped.
    struct Footprint {
        var idleRSS = 0.0, servingRSS = 0.0, threads = 0.0
        var swiftMapped = false
    }

    static func footprint(executable: String, count: Int) throws -> Footprint {
        var f = Footprint()
        for i in 0..<count {
            let e = try RawExtension(executable: executable, id: "footprint.\(i)")
            defer { e.kill() }
            try e.waitReady()
            try e.deliver()
            try ping(e.request)
            f.servingRSS += Double(residentBytes(e.pid) ?? 0) / 1024 / Double(count)
            let maps = readText("/proc/\(e.pid)/maps") ?? ""
            if maps.contains("libFoundation") || maps.contains("libicu") || maps.contains("libswiftCore") { f.swiftMapped = true }
            // End the request; the thread that served it exits. The count is read until it has
            // not changed for 50 ms (at most 1 s): no event tells when a thread is gone.
            close(e.request)
            e.request = -1
            var threads = contextSwitches(e.pid).threads, stableSince = now(), started = now()
            while now() - stableSince < 0.05 && now() - started < 1 {
                usleep(2_000)
                let t = contextSwitches(e.pid).threads
                if t != threads { threads = t; stableSince = now() }
            }
            f.threads += Double(threads) / Double(count)
            f.idleRSS += Double(residentBytes(e.pid) ?? 0) / 1024 / Double(count)
        }
        return f
    }
}
