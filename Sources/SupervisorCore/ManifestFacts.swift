/// What the shell found on disk for manifest loading, as plain values: each extension
/// directory's listing, each manifest file's status and bytes, and each named executable's
/// status. `ManifestValidation` judges them; nothing here decides whether a manifest is
/// accepted.

/// The parts of a file's status that loading checks (from `fstat` or `stat`).
public struct FileFacts: Equatable, Sendable {
    /// Whether it is a regular file.
    public var isRegular: Bool
    /// The owner's uid.
    public var owner: UInt32
    /// The permission bits (`st_mode & 07777`).
    public var mode: UInt32
    /// The size in bytes.
    public var size: Int64

    /// Facts as `fstat` gave them; `mode` holds the permission bits.
    public init(isRegular: Bool = true, owner: UInt32, mode: UInt32, size: Int64 = 0) {
        self.isRegular = isRegular
        self.owner = owner
        self.mode = mode
        self.size = size
    }
}

/// One extension directory as it was read.
public struct ManifestDirectory: Equatable, Sendable {
    /// The directory, as configured (`--extensions`).
    public var path: String
    /// Its manifest files, or why it could not be listed.
    public var listing: Listing

    /// A listed directory's manifest files, or why it could not be listed.
    public enum Listing: Equatable, Sendable {
        /// It could not be listed; `reason` is the system's word for why (`strerror`).
        case unreadable(reason: String)
        /// Its manifest files, in the order `manifestNames` gives.
        case files([ManifestFile])
    }

    /// A directory at `path` and what listing it gave.
    public init(path: String, listing: Listing) {
        self.path = path
        self.listing = listing
    }

    /// The entries of a directory that are manifests: names that end in `.json` and do not
    /// start with `.`, sorted by name.
    public static func manifestNames(_ entries: [String]) -> [String] {
        entries.filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }.sorted()
    }

    /// The path of entry `name` of `directory` (one `/` between them).
    public static func path(of name: String, in directory: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}

/// One manifest file as it was read: opened without following a symbolic link, examined
/// through the open descriptor, and read when it is a regular file of at most
/// `ManifestParser.maxFileSize` bytes.
public struct ManifestFile: Equatable, Sendable {
    /// Its path: `Manifest.source`, and the file every refusal names.
    public var path: String
    /// The extension directory it is in (a relative `executable` is resolved against it).
    public var directory: String
    /// What opening, examining and reading it gave.
    public var reading: Reading

    /// What opening, examining and reading a manifest file gave: an error, or its facts and (for a regular file within the size limit) its bytes.
    public enum Reading: Equatable, Sendable {
        /// `open` failed (a symbolic link fails here too); `reason` is the system's word for why.
        case notOpened(reason: String)
        /// `fstat` or `read` failed.
        case notExamined(reason: String)
        /// What `fstat` said, and the file's bytes: nil when it is not a regular file or is
        /// larger than `ManifestParser.maxFileSize` (it was not read).
        case examined(FileFacts, contents: [UInt8]?)
    }

    /// A manifest file at `path` of the extension directory `directory`, and what reading it gave.
    public init(path: String, directory: String, reading: Reading) {
        self.path = path
        self.directory = directory
        self.reading = reading
    }
}

/// The program a manifest names, as `stat` (following symbolic links) and `access(X_OK)`
/// found it.
public enum ExecutableFacts: Equatable, Sendable {
    /// `stat` failed; `reason` is the system's word for why.
    case missing(reason: String)
    /// What `stat` said; `executable` is whether it is a regular file `access(X_OK)` allowed.
    case found(FileFacts, executable: Bool)
}
