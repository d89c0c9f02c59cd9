import ExtensionTransport
import Logging
import SupervisorKernel
import Testing

@testable import SupervisorShell

/// The calls that make, repair and reset an extension's own container, through the recording
/// kernel: every mode is set while the daemon owns the directory (the system unit grants no
/// `CAP_FOWNER`), and a reset removes the old contents off the loop, as their owner.
struct ExtensionContainersTests {
    static let root = "/var/lib/extensiond/extensions"
    static let path = root + "/org.example.x"
    let logger = Logger(label: "test")

    func kernel() -> RecordingKernel {
        let k = RecordingKernel()
        for dir in ["/var/lib/extensiond", Self.root] {
            k.statuses[dir] = FileStatus(kind: .directory, permissions: 0o755, owner: 0, group: 0, size: 0, identity: FileIdentity(device: 1, inode: 1))
        }
        return k
    }

    @Test func aNewContainerIsMadeWithItsModeThenGivenAway() throws {
        let k = kernel()
        k.parentsMustExist = true
        let containers = ExtensionContainers(stateDirectory: "/var/lib/extensiond", kernel: k)
        #expect(try containers.prepare("org.example.x", uid: 1234, gid: 1234).get() == Self.path)
        let changes = k.calls.filter { if case .stat = $0 { false } else { true } }
        #expect(changes == [.makeDirectory(Self.path), .changeOwner(Self.path, 1234, 1234)], "the directories above exist: not made again")
    }

    /// The state directory and `extensions/` are made when the container's mkdir finds them
    /// missing (the first launch on a new system).
    @Test func theDirectoriesAboveAreMadeWhenMissing() throws {
        let k = RecordingKernel()
        k.parentsMustExist = true
        k.statuses["/var/lib"] = FileStatus(kind: .directory, permissions: 0o755, owner: 0, group: 0, size: 0, identity: FileIdentity(device: 1, inode: 1))
        let containers = ExtensionContainers(stateDirectory: "/var/lib/extensiond", kernel: k)
        #expect(try containers.prepare("org.example.x", uid: 1234, gid: 1234).get() == Self.path)
        let changes = k.calls.filter { if case .stat = $0 { false } else { true } }
        #expect(
            changes == [
                .makeDirectory(Self.path), .makeDirectory("/var/lib/extensiond"), .makeDirectory(Self.root), .makeDirectory(Self.path),
                .changeOwner(Self.path, 1234, 1234),
            ])
    }

    @Test func aContainerItsOwnerOpenedUpIsTakenBackFirst() throws {
        let k = kernel()
        k.statuses[Self.path] = FileStatus(kind: .directory, permissions: 0o777, owner: 1234, group: 1234, size: 0, identity: FileIdentity(device: 1, inode: 3))
        let containers = ExtensionContainers(stateDirectory: "/var/lib/extensiond", kernel: k)
        _ = try containers.prepare("org.example.x", uid: 1234, gid: 1234).get()
        let changes = k.calls.filter { if case .changeMode = $0 { true } else if case .changeOwner = $0 { true } else { false } }
        #expect(changes == [.changeOwner(Self.path, 0, UInt32.max), .changeMode(Self.path, 0o700), .changeOwner(Self.path, 1234, 1234)])
    }

    @Test func aContainerAsItShouldBeIsLeftAlone() throws {
        let k = kernel()
        k.statuses[Self.path] = FileStatus(kind: .directory, permissions: 0o700, owner: 1234, group: 1234, size: 0, identity: FileIdentity(device: 1, inode: 3))
        let containers = ExtensionContainers(stateDirectory: "/var/lib/extensiond", kernel: k)
        _ = try containers.prepare("org.example.x", uid: 1234, gid: 1234).get()
        #expect(!k.calls.contains { if case .changeMode = $0 { true } else if case .changeOwner = $0 { true } else { false } })
    }

    @Test func resetReplacesTheContainerAndRemovesTheOldOneInTheBackgroundAsItsOwner() throws {
        let k = kernel()
        k.statuses[Self.path] = FileStatus(kind: .directory, permissions: 0o700, owner: 1234, group: 1235, size: 0, identity: FileIdentity(device: 1, inode: 3))
        let containers = ExtensionContainers(stateDirectory: "/var/lib/extensiond", kernel: k)
        var outcomes: [SystemError?] = []
        try containers.reset("org.example.x", logger: logger) { outcomes.append($0) }.get()
        let aside = Self.root + "/.removing-org.example.x-\(k.processID)-1"
        #expect(k.calls.first { if case .rename = $0 { true } else { false } } == .rename(Self.path, aside))
        #expect(k.calls.contains(.changeOwner(Self.path, 1234, 1235)), "an empty container with the same owner takes its place")
        #expect(k.calls.last == .removeTree(aside, owner: FileOwner(uid: 1234, gid: 1235)))
        #expect(outcomes.isEmpty, "the removal runs off the loop")
        k.backgroundWork.forEach { $0() }
        #expect(outcomes.count == 1 && outcomes[0] == nil)
    }

    @Test func resetWithoutAContainerDoesNothing() throws {
        let k = kernel()
        let containers = ExtensionContainers(stateDirectory: "/var/lib/extensiond", kernel: k)
        try containers.reset("org.example.x", logger: logger).get()
        #expect(k.calls == [.stat(Self.path)])
    }

    @Test func leftoversOfAnInterruptedResetAreRemovedAtStart() {
        let k = kernel()
        let aside = Self.root + "/.removing-org.example.x-77-1"
        k.directories[Self.root] = ["org.example.x", ".removing-org.example.x-77-1"]
        k.statuses[aside] = FileStatus(kind: .directory, permissions: 0o700, owner: 1234, group: 1234, size: 0, identity: FileIdentity(device: 1, inode: 4))
        ExtensionContainers(stateDirectory: "/var/lib/extensiond", kernel: k).removeLeftovers(logger: logger)
        #expect(k.calls.filter { if case .removeTree = $0 { true } else { false } } == [.removeTree(aside, owner: FileOwner(uid: 1234, gid: 1234))])
    }
}
