import SupervisorCore
import Testing

/// Where a URL goes, and the desktop files that say so (URLOpening: pure).
@Suite struct URLOpeningTests {
    static let stocks = AppManifest(id: "com.example.stocks", groups: [], urlSchemes: ["stocks"], launch: .dbusActivatable)
    static let other = AppManifest(
        id: "com.example.another", groups: [], urlSchemes: ["stocks", "news"], launch: .executable(path: "/bin/news", arguments: ["--open"]))

    @Test func schemesAreReadAsRFC3986SaysAndMalformedURLsAreRefusedNamingWhy() {
        #expect(URLOpening.scheme(of: "Stocks://item/42") == "stocks")
        #expect(URLOpening.scheme(of: "web+x-1.a:rest") == "web+x-1.a")
        #expect(URLOpening.scheme(of: "1stocks://x") == nil)
        #expect(URLOpening.scheme(of: "no-colon") == nil)
        #expect(URLOpening.problem("stocks://item/42") == nil)
        #expect(URLOpening.problem("") == "the URL is empty")
        #expect(URLOpening.problem("stocks://a b")?.contains("space") == true)
        #expect(URLOpening.problem("/item/42")?.contains("no scheme") == true)
        #expect(URLOpening.problem("x:" + String(repeating: "a", count: 2047))?.contains("over 2048") == true)
    }

    @Test func theExtensionsOwnAppWinsThenTheFirstAppThatDeclaresTheSchemeThenTheSessionsHandler() {
        let apps = [Self.other, Self.stocks]
        #expect(URLOpening.route(scheme: "stocks", extensionApp: "com.example.stocks", apps: apps) == .app(Self.stocks))
        #expect(URLOpening.route(scheme: "stocks", extensionApp: nil, apps: apps) == .app(Self.other), "com.example.another sorts first")
        #expect(URLOpening.route(scheme: "https", extensionApp: "com.example.stocks", apps: apps) == .schemeHandler("https"))
        #expect(URLOpening.command(Self.other.launch, url: "news:1") == ["/bin/news", "--open", "news:1"])
    }

    @Test func execLinesAreSplitAndTheirFieldCodesExpandedForOneURL() {
        #expect(URLOpening.expandExec("browser %u", url: "https://a") == ["browser", "https://a"])
        #expect(URLOpening.expandExec("\"/opt/my app/run\" --new-window %U %i", url: "x:y") == ["/opt/my app/run", "--new-window", "x:y"])
        #expect(URLOpening.expandExec("viewer --url=%u 100%%", url: "x:y") == ["viewer", "--url=x:y", "100%"])
        #expect(URLOpening.expandExec("plain", url: "x:y") == ["plain", "x:y"], "no field code: the URL is appended")
        #expect(URLOpening.expandExec("\"unterminated %u", url: "x:y") == nil)
        #expect(URLOpening.expandExec("sh -c \"open %u\"", url: "x:$(reboot)") == nil, "a field code in quotes could reach a shell")
    }

    @Test func mimeappsListsAndDesktopEntriesAreRead() {
        let list = """
            [Added Associations]
            x-scheme-handler/stocks=added.desktop;
            [Default Applications]
            # a comment
            x-scheme-handler/stocks = first.desktop;second.desktop
            x-scheme-handler/news=news.desktop
            """
        #expect(URLOpening.associations(inMimeApps: list, for: "x-scheme-handler/stocks") == ["first.desktop", "second.desktop", "added.desktop"])
        let entry = """
            [Desktop Entry]
            Type=Application
            Name=Stocks
            Name[de]=Aktien
            Exec=stocks %u
            MimeType=text/plain;x-scheme-handler/stocks;
            [Desktop Action new]
            Exec=ignored
            """
        let keys = URLOpening.desktopEntry(entry)
        #expect(keys["Exec"] == "stocks %u" && keys["Name"] == "Stocks" && keys["Name[de]"] == nil)
        #expect(URLOpening.entry(keys, handles: "x-scheme-handler/stocks"))
        #expect(!URLOpening.entry(keys, handles: "x-scheme-handler/news"))
    }

    @Test func theRateIsPerMinute() {
        var rate = OpenURLRate()
        let t0 = Instant(nanoseconds: 1_000_000_000)
        let answers = [0, 1, 59, 60].map { rate.admit(at: t0.adding(seconds: Double($0)), perMinute: 2) }
        #expect(answers == [true, true, false, true])
    }
}
