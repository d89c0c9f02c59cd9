import SupervisorCore
import Testing

@Suite("App process identity")
struct AppProcessIdentityTests {
    @Test func aDesktopAppIsNamedByItsScopeOrService() {
        #expect(AppProcessIdentity.appID(unit: "app-gnome-com.example.stocks-4711.scope") == "com.example.stocks")
        #expect(AppProcessIdentity.appID(unit: "app-com.example.stocks-4711.scope") == "com.example.stocks")
        #expect(AppProcessIdentity.appID(unit: "app-gnome-org.example.my\\x2dnotes-12.scope") == "org.example.my-notes")
        #expect(AppProcessIdentity.appID(unit: "app-flatpak-com.example.stocks@9d8c.service") == "com.example.stocks")
        #expect(AppProcessIdentity.appID(unit: "app-com.example.stocks.service") == "com.example.stocks")
        // Not an app's unit, or not an app id.
        #expect(AppProcessIdentity.appID(unit: "session-2.scope") == nil)
        #expect(AppProcessIdentity.appID(unit: "app-gnome-firefox-12.scope") == nil, "no reverse-DNS id")
        #expect(AppProcessIdentity.appID(unit: "app-a-b-com.example.x-1.scope") == nil, "too many parts")
        #expect(AppProcessIdentity.appID(unit: "app-gnome-com.example.x\\x2f..-1.scope") == nil, "an escape an id cannot hold")
        #expect(AppProcessIdentity.appID(unit: "app.slice") == nil)
    }

    @Test func theCgroupLineIsReadFromItsLeaf() {
        let cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-com.example.stocks-4711.scope\n"
        #expect(AppProcessIdentity.desktopApp(Array(cgroup.utf8)) == "com.example.stocks")
        let terminal = "0::/user.slice/user-1000.slice/session-2.scope\n"
        #expect(AppProcessIdentity.desktopApp(Array(terminal.utf8)) == nil)
        let hybrid = "12:memory:/user.slice\n0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-com.example.notes@1.service\n"
        #expect(AppProcessIdentity.desktopApp(Array(hybrid.utf8)) == "com.example.notes")
    }
}
