import ExtensionProtocol
import SupervisorCore
import Testing

@Suite("Shared containers")
struct SharedContainerTests {
    @Test func theVariableNameIsUpperCasedWithUnderscores() {
        #expect(SharedContainer.environmentName(for: "group.com.example.stocks") == "EXTENSION_SHARED_CONTAINER_GROUP_COM_EXAMPLE_STOCKS")
        #expect(SharedContainer.environmentName(for: "group.a-b_c.D9") == "EXTENSION_SHARED_CONTAINER_GROUP_A_B_C_D9")
    }

    @Test func aManifestNamesContainers() throws {
        let m = try parseManifest(
            #"{"id": "com.example.s", "executable": "/bin/true", "sharedContainers": ["group.com.example.stocks", "group.com.example.news"]}"#
        ).get()
        #expect(m.sharedContainers == ["group.com.example.stocks", "group.com.example.news"])
        #expect(m.containerPaths.isEmpty, "paths are filled in by the daemon")
    }

    @Test(arguments: [
        (#""sharedContainers": ["stocks"]"#, "sharedContainers[0]", "'stocks' is not in reverse-DNS form (such as group.com.example.stocks)"),
        (#""sharedContainers": ["group/x.y"]"#, "sharedContainers[0]", "may contain only letters"),
        (#""sharedContainers": ["a.b", "a.b"]"#, "sharedContainers[1]", "'a.b' is listed twice"),
        (#""sharedContainers": "a.b""#, "sharedContainers", "expected an array"),
        (#""environment": {"EXTENSION_SHARED_CONTAINER_X": "/tmp"}"#, "environment.EXTENSION_SHARED_CONTAINER_X", "are set by the supervisor"),
    ])
    func badNamesAreRefusedNamingTheKey(json: String, field: String, problem: String) {
        guard case .failure(let e) = parseManifest(#"{"id": "com.example.s", "executable": "/bin/true", "# + json + "}") else {
            Issue.record("accepted \(json)")
            return
        }
        #expect(e.field == field, "\(e)")
        #expect(e.problem.contains(problem), "\(e.problem)")
    }

    @Test func theConfigurationGivesAContainerAGroup() throws {
        let c = try parseConfig(#"{"sharedContainers": {"group.com.example.stocks": {"group": "stocks"}, "group.com.example.news": {"group": 2001}}}"#).get()
        #expect(c.containerGroups == ["group.com.example.stocks": .name("stocks"), "group.com.example.news": .number(2001)])
    }

    @Test(arguments: [
        (#"{"sharedContainers": {"stocks": {"group": "x"}}}"#, "sharedContainers.stocks"),
        (#"{"sharedContainers": {"group.a.b": {}}}"#, "sharedContainers.group.a.b.group"),
        (#"{"sharedContainers": {"group.a.b": {"group": 0}}}"#, "sharedContainers.group.a.b.group"),
        (#"{"sharedContainers": {"group.a.b": {"group": true}}}"#, "sharedContainers.group.a.b.group"),
        (#"{"sharedContainers": {"group.a.b": {"group": "x", "members": []}}}"#, "sharedContainers.group.a.b.members"),
    ])
    func badContainerConfigurationIsRefusedNamingTheKey(json: String, field: String) {
        guard case .failure(let e) = parseConfig(json) else {
            Issue.record("accepted \(json)")
            return
        }
        #expect(e.field == field, "\(e)")
    }

    @Test func containerGIDsComeFromThePoolOfExtensionUIDs() {
        var map = IdentityMap()
        let range = IdentityRange(first: 5000, count: 10)
        #expect(map.uid(for: "a", in: range)! == (5000, true))
        #expect(map.gid(forContainer: "group.x.y", in: range)! == (5001, true))
        #expect(map.uid(for: "b", in: range)! == (5002, true), "no extension gets a container's number as its uid and gid")
        #expect(map.gid(forContainer: "group.x.y", in: range)! == (5001, false))
    }
}
