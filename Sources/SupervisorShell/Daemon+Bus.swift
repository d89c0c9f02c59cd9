import ExtensionStatus
import SupervisorCore
import SupervisorKernel

/// What the D-Bus interface reads from the daemon (docs/dbus.md), and putting it on its bus.
extension Daemon: BusInterfaceDelegate {
    /// Puts the D-Bus interface on the bus `--bus` chose, when one is chosen: at once when it
    /// can be reached, else later (`BusInterface.start`).
    func startBus() {
        guard bus == nil, let system = busChoice.systemBus(uid: kernel.userID) else { return }
        let interface = BusInterface(
            systemBus: system, waitsForAbsentBus: busChoice != .auto, version: daemonVersion, server: server, delegate: self, kernel: kernel,
            logger: logger)
        bus = interface
        interface.start()
    }

    func busList() -> ListDocument {
        StatusDocument.list(sortedRecords(), clock, apps: apps.sorted, members: appMembers())
    }

    func busStatus(_ id: String) -> StatusReport.Extension? {
        guard let r = core.records[id] else { return nil }
        return statusDocument([r]).extensions.first
    }

    func busHasExtension(_ id: String) -> Bool { core.records[id] != nil }

    func busExtensionIDs() -> [String] { core.records.keys.sorted() }

    func busSummary(_ id: String) -> (since: String, requests: Int, assertions: Int)? {
        guard let r = core.records[id], let e = StatusDocument.list([r], clock).extensions.first else { return nil }
        return (e.since, e.requests, e.assertions)
    }

    /// The clocks a document's times are written with.
    var clock: StatusDocument.Clock { StatusDocument.Clock(monotonicNow: kernel.now(), wallClock: kernel.wallClock()) }
}
