import ExtensionProtocol
import Logging
import SupervisorCore
import SupervisorKernel

/// The secret items (docs/secrets.md), kept by the daemon: each in a file of its own under
/// `STATE/secrets/items/`, its description in clear and its data sealed (`SecretCipher`, the
/// description as additional data). Loaded at the first use; a file that does not open is
/// refused by name and set aside (`NAME.bad`), the others kept. Data is decrypted only to
/// answer a copy, into a `SecretData` that clears itself. Owned by the daemon's loop thread.
final class SecretStore {
    /// One item as kept.
    struct Stored {
        var attributes: SecretAttributes
        var sealed: [UInt8]
    }

    private let directory: String
    private let kernel: any Kernel
    private let logger: Logger
    private var cipher: SecretCipher?
    private var loadProblem: String?
    private var loaded = false
    /// Item id → item.
    private(set) var items: [String: Stored] = [:]
    /// Most items one access group holds.
    static let maxItemsPerGroup = 1_000
    static let magic: [UInt8] = Array("EXTSECR1".utf8)

    init(stateDirectory: String, kernel: any Kernel, logger: Logger) {
        directory = stateDirectory + "/secrets"
        self.kernel = kernel
        self.logger = logger
    }

    /// Loads the key and the items on first use; why the store cannot be used, or nil.
    func ready() -> String? {
        if loaded { return loadProblem }
        loaded = true
        let state = String(directory.dropLast("/secrets".count))
        if let e = kernel.makeDirectories(state, mode: 0o755) {
            loadProblem = "cannot create the state directory: \(e)"
            return loadProblem
        }
        for path in [directory, directory + "/items"] {
            if let e = kernel.makeDirectory(path, mode: 0o700), !e.isAlreadyExisting {
                loadProblem = "cannot create \(path): \(e)"
                return loadProblem
            }
        }
        let names = (kernel.listDirectory(directory + "/items") ?? []).filter { $0.count == 32 && $0.allSatisfy(\.isHexDigit) }
        let keySource: String
        switch SecretKeys.load(directory: directory, kernel: kernel, logger: logger, itemsExist: !names.isEmpty) {
        case .failure(let why):
            loadProblem = why.description
            logger.error("the secret store cannot be used: \(why)")
            return why.description
        case .success(let (cipher, source)):
            self.cipher = cipher
            keySource = source
            logger.info("the secret store's key comes from \(source)")
        }
        var unopened: [(String, String)] = []
        for name in names {
            let path = directory + "/items/" + name
            let bytes: [UInt8]
            switch kernel.read(path) {
            case .success(let b): bytes = b
            case .failure(let e):
                // Not a damaged item: the store cannot be read now, and nothing is set aside.
                loadProblem = "cannot read \(path): \(e)"
                items = [:]
                logger.error("the secret store cannot be used: \(loadProblem!)")
                return loadProblem
            }
            switch parse(bytes) {
            case .success(let item):
                if cipher!.open(item.sealed, additional: Self.additional(item.attributes)) == nil {
                    unopened.append((path, "it does not open with the store's key: damaged, or moved to another group or item"))
                } else {
                    items[name] = item
                }
            case .failure(let why): refuse(path, why.description)
            }
        }
        // Not one item opens: the key is not the one they were sealed with (a credential
        // replaced), not every item damaged. The store stays unusable, and nothing is set aside.
        if items.isEmpty && unopened.count > 1 {
            loadProblem = "none of the \(unopened.count) items opens with the key from \(keySource): is it the key they were sealed with?"
            logger.error("the secret store cannot be used: \(loadProblem!)")
            return loadProblem
        }
        for (path, why) in unopened { refuse(path, why) }
        return nil
    }

    private func refuse(_ path: String, _ why: String) {
        logger.error("secret item \(path) refused: \(why); it is set aside as \(path).bad, the other items are kept")
        _ = kernel.rename(path, to: path + ".bad")
    }

    /// The additional data of an item: the magic and its description.
    static func additional(_ attributes: SecretAttributes) -> [UInt8] { magic + ((try? WireEncoder.encoded(attributes)) ?? []) }

    private func parse(_ bytes: [UInt8]) -> Result<Stored, StoreProblem> {
        guard bytes.count >= 12, Array(bytes[0..<8]) == Self.magic else { return .failure(StoreProblem("not a secret item (no EXTSECR1 header)")) }
        let length = Int(bytes[8]) | Int(bytes[9]) << 8 | Int(bytes[10]) << 16 | Int(bytes[11]) << 24
        guard length <= bytes.count - 12 else { return .failure(StoreProblem("truncated")) }
        do {
            let attributes = try WireDecoder.attributes(Array(bytes[12..<12 + length]))
            return .success(Stored(attributes: attributes, sealed: Array(bytes[(12 + length)...])))
        } catch {
            return .failure(StoreProblem("its description is malformed: \(error)"))
        }
    }

    private func file(_ item: Stored) -> [UInt8] {
        let meta = (try? WireEncoder.encoded(item.attributes)) ?? []
        return Self.magic + withUnsafeBytes(of: UInt32(meta.count).littleEndian) { Array($0) } + meta + item.sealed
    }

    /// The items `query` finds for `groups`, by id.
    func matches(_ query: SecretAttributes, groups: [String]) -> [(id: String, item: Stored)] {
        items.filter { SecretAccess.finds(query, item: $0.value.attributes, callerGroups: groups) }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Adds an item; `done` gets the outcome once its file is durable.
    func add(_ attributes: SecretAttributes, data: SecretData, groups: [String], _ done: @escaping (SecretRefusal?) -> Void) {
        if let why = ready() { return done(SecretRefusal(.internalError, "the secret store cannot be used: \(why)")) }
        if let problem = SecretAccess.addProblem(attributes, dataCount: data.count) { return done(SecretRefusal(.badRequest, problem)) }
        var attributes = attributes
        switch SecretAccess.addGroup(attributes.group, callerGroups: groups) {
        case .failure(let refusal): return done(refusal)
        case .success(let group): attributes.group = group
        }
        let identity = attributes.identity
        if items.values.contains(where: { $0.attributes.identity == identity }) {
            return done(SecretRefusal(.duplicateItem, "an item with these attributes exists already in '\(attributes.group)'"))
        }
        // A quota per group: what one app holds says nothing of the others, nor takes their room.
        let group = attributes.group
        guard items.values.count(where: { $0.attributes.group == group }) < Self.maxItemsPerGroup else {
            return done(SecretRefusal(.limitReached, "the group '\(group)' holds \(Self.maxItemsPerGroup) items already"))
        }
        let id = SecretCipher.randomBytes(16).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        let item = Stored(attributes: attributes, sealed: cipher!.seal(data, additional: Self.additional(attributes)))
        let refusal = write(id, item)
        if refusal == nil { items[id] = item }
        done(refusal)
    }

    /// The first match with its data, or every match's attributes; `itemNotFound` when none.
    func copy(_ query: SecretAttributes, returnData: Bool, all: Bool, groups: [String]) -> Result<[SecretItem], SecretRefusal> {
        if let why = ready() { return .failure(SecretRefusal(.internalError, "the secret store cannot be used: \(why)")) }
        let found = matches(query, groups: groups)
        guard let first = found.first else { return .failure(SecretRefusal(.itemNotFound, "no item matches")) }
        if returnData {
            guard let data = cipher!.open(first.item.sealed, additional: Self.additional(first.item.attributes)) else {
                return .failure(SecretRefusal(.internalError, "the item does not open any more"))
            }
            return .success([SecretItem(attributes: first.item.attributes, data: data)])
        }
        return .success((all ? found : [first]).prefix(WireLimits.maxSecretItems).map { SecretItem(attributes: $0.item.attributes, data: nil) })
    }

    /// Changes every match's label and/or data; `done` once, when every file is durable.
    func update(_ query: SecretAttributes, label: String?, data: SecretData?, groups: [String], _ done: @escaping (SecretRefusal?) -> Void) {
        if let why = ready() { return done(SecretRefusal(.internalError, "the secret store cannot be used: \(why)")) }
        if let data, data.count == 0 { return done(SecretRefusal(.badRequest, "an item needs data (1 to \(WireLimits.maxSecret) bytes)")) }
        let found = matches(query, groups: groups)
        guard !found.isEmpty else { return done(SecretRefusal(.itemNotFound, "no item matches")) }
        var failure: SecretRefusal?
        for (id, old) in found {
            guard let current = data ?? cipher!.open(old.sealed, additional: Self.additional(old.attributes)) else {
                failure = failure ?? SecretRefusal(.internalError, "an item does not open any more")
                continue
            }
            var attributes = old.attributes
            if let label { attributes.label = label }
            let item = Stored(attributes: attributes, sealed: cipher!.seal(current, additional: Self.additional(attributes)))
            if let refusal = write(id, item) {
                failure = failure ?? refusal
            } else {
                items[id] = item
            }
        }
        done(failure)
    }

    /// Deletes every match.
    func delete(_ query: SecretAttributes, groups: [String]) -> SecretRefusal? {
        if let why = ready() { return SecretRefusal(.internalError, "the secret store cannot be used: \(why)") }
        let found = matches(query, groups: groups)
        guard !found.isEmpty else { return SecretRefusal(.itemNotFound, "no item matches") }
        for (id, _) in found {
            if let e = kernel.removeFile(directory + "/items/" + id), !e.isNoEntry { return SecretRefusal(.internalError, "cannot remove an item: \(e)") }
            items[id] = nil
        }
        return nil
    }

    /// Every item's class, group and label (for administrators), in `group` if given.
    func list(group: String?) -> Result<[SecretAttributes], StoreProblem> {
        if let why = ready() { return .failure(StoreProblem(why)) }
        return .success(
            items.values.map(\.attributes).filter { group == nil || $0.group == group }
                .sorted { ($0.group, $0.label ?? "") < ($1.group, $1.label ?? "") })
    }

    /// Writes the item's file, durably, on the loop's thread: one write at a time, so that no
    /// two writes of an item, or a write and a delete, can cross (a few milliseconds each;
    /// adds and updates are rare, and each connection's and channel's rate bounds them).
    private func write(_ id: String, _ item: Stored) -> SecretRefusal? {
        kernel.replaceFile(directory + "/items/" + id, withParts: [file(item)], mode: 0o600, durable: true)
            .map { SecretRefusal(.internalError, "cannot write the item: \($0)") }
    }
}
