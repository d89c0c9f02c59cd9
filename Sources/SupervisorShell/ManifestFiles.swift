import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// Reads what manifest loading judges, and decides nothing: the manifest files of the
/// extension directories, and the status of the executables the manifests name.
/// `ManifestValidation` (core) judges the result.
///
/// Every kernel call of loading before provisioning is here, and there are few: listing a
/// directory (and, when that fails, `stat` of it for the reason), `Kernel.inspectFile` of
/// each manifest (`open` with `O_NOFOLLOW | O_NONBLOCK`, `fstat`, `read` of a regular file
/// within `ManifestParser.maxFileSize`), and `stat` and `access(X_OK)` of each executable.
struct ManifestFiles {
    let kernel: any Kernel

    /// Each directory's manifest files (`ManifestDirectory.manifestNames`), in order.
    func read(_ directories: [String]) -> [ManifestDirectory] {
        directories.map { directory in
            guard let entries = kernel.listDirectory(directory) else {
                let why = kernel.status(directory, followLinks: true).failure.map { "\($0)" } ?? "it is not a readable directory"
                return ManifestDirectory(path: directory, listing: .unreadable(reason: why))
            }
            let files = ManifestDirectory.manifestNames(entries).map { name in
                let path = ManifestDirectory.path(of: name, in: directory)
                return ManifestFile(path: path, directory: directory, reading: reading(path))
            }
            return ManifestDirectory(path: directory, listing: .files(files))
        }
    }

    /// What `stat` and `access(X_OK)` say of each executable, keyed by its path.
    func examine(_ executables: [String]) -> [String: ExecutableFacts] {
        var facts: [String: ExecutableFacts] = [:]
        for path in executables {
            switch kernel.status(path, followLinks: true) {
            case .success(let st):
                let found = Self.facts(st)
                facts[path] = .found(found, executable: found.isRegular && kernel.isExecutable(path))
            case .failure(let e):
                facts[path] = .missing(reason: "\(e)")
            }
        }
        return facts
    }

    /// Opens, examines and (a regular file within the size limit) reads one manifest file.
    private func reading(_ path: String) -> ManifestFile.Reading {
        switch kernel.inspectFile(path, limit: Int64(ManifestParser.maxFileSize)) {
        case .success(let found): return .examined(Self.facts(found.status), contents: found.contents)
        case .failure(let e) where e.operation == "open": return .notOpened(reason: e.reason)
        case .failure(let e): return .notExamined(reason: e.reason)
        }
    }

    private static func facts(_ st: FileStatus) -> FileFacts {
        FileFacts(isRegular: st.kind == .regular, owner: st.owner, mode: st.permissions, size: st.size)
    }
}
