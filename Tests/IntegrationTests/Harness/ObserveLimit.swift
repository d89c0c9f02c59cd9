import ExtensionHost
import ExtensionProtocol
import Testing

/// The observe limit, checked the same way for every runtime through a probe's channel: the
/// probe observes `WireLimits.maxObservedHints + 1` names under `prefix` (`observe-many`) and
/// answers `refusal`; once it has answered `sync` with `synced` (an assertion round trip, after
/// which extensiond has read the observes sent before it), a post of the refused name is not
/// delivered and one of the last name observed is.
func expectTheNameAfterTheMostObservedIsRefused(
    host: ExtensionHostConnection, channel: HostChannel, prefix: String, refusal: String, sync: String, synced: [String]
) throws {
    channel.send("observe-many \(WireLimits.maxObservedHints + 1) \(prefix)")
    #expect(channel.readLine() == refusal)
    channel.send(sync)
    for answer in synced { #expect(channel.readLine() == answer) }
    try host.post("\(prefix).257")
    try host.post("\(prefix).256")
    #expect(channel.readLine() == "notified \(prefix).256")
}
