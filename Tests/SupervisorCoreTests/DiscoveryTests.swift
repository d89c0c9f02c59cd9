import ExtensionProtocol
import SupervisorCore
import Testing

/// Discovery by extension point and content: the `activation` rule, its manifest form, and the
/// supervisor's query with the `hosts` rule applied.
@Suite("Discovery and activation rules")
struct DiscoveryTests {
    static func content(_ counts: [String: UInt32]) throws -> ActivationContent { try ActivationContent(counts) }

    static let shareRule = ActivationRule(
        text: true, urls: 1, images: 3, contentTypes: [.init(type: "application/pdf", max: 1), .init(type: "video/*", max: 2)])

    @Test func aRuleAcceptsContentWithinEveryCount() throws {
        let r = Self.shareRule
        #expect(r.accepts(try Self.content(["url": 1])))
        #expect(r.accepts(try Self.content(["url": 1, "image": 3])))
        #expect(r.accepts(try Self.content(["text": 5])), "text is a yes/no capability, not a count")
        #expect(r.accepts(try Self.content(["application/pdf": 1, "video/mp4": 2, "image": 0, "file": 0])), "zero counts are absent kinds")
        #expect(!r.accepts(try Self.content(["url": 2])), "over the url count")
        #expect(!r.accepts(try Self.content(["image": 4, "url": 1])), "one kind over its count refuses the whole")
        #expect(!r.accepts(try Self.content(["file": 1])), "files are not accepted by this rule")
        #expect(!r.accepts(try Self.content(["application/pdf": 2])))
        #expect(!r.accepts(try Self.content(["application/zip": 1])), "a MIME type the rule does not name")
        #expect(!r.accepts(try Self.content(["videos/mp4": 1])), "video/* covers video/… only")
        #expect(!r.accepts(try Self.content([:])), "empty content is not a content query")
        #expect(!ActivationRule().accepts(try Self.content(["text": 1])), "the empty rule accepts nothing")
    }

    @Test func contentIsParsedFromTheCommandLineFormAndRefusedWithTheReason() throws {
        #expect(try ActivationContent(parsing: "url=1,image=3,application/pdf=2").counts == ["url": 1, "image": 3, "application/pdf": 2])
        #expect(try ActivationContent(parsing: "image=0").counts.isEmpty)
        #expect(try ActivationContent(parsing: "url=10000").counts == ["url": 10_000])
        for (text, problem) in [
            ("url", "'url' is not KIND=COUNT (e.g. url=1,image=3)"),
            ("url=-1", "'url=-1' is not KIND=COUNT (e.g. url=1,image=3)"),
            ("url=1,", "'' is not KIND=COUNT (e.g. url=1,image=3)"),
            ("url=1,url=2", "'url' is given twice"),
            ("picture=1", "'picture' is not a kind of content (text, url, image, file, or a MIME type such as application/pdf)"),
            ("image/*=1", "'image/*' is not a kind of content (text, url, image, file, or a MIME type such as application/pdf)"),
            ("url=10001", "'url=10001': a count is an integer from 0 to 10000"),
        ] {
            #expect(throws: ActivationContent.Problem(problem), "\(text)") { try ActivationContent(parsing: text) }
        }
    }

    @Test func theManifestFormIsParsed() throws {
        let m = try parseManifest(
            minimal(
                """
                , "displayName": "Send to Notes", "activation": {"text": true, "urls": 1, "images": 3,
                  "contentTypes": [{"type": "application/pdf"}, {"type": "video/*", "max": 2}]}
                """)
        ).get()
        #expect(m.displayName == "Send to Notes")
        let arabic = try parseManifest(minimal(#", "displayName": "\u0645\u0644\u0627\u062d\u0638\u0627\u062a Notes""#)).get()
        #expect(arabic.displayName == "ملاحظات Notes", "right-to-left text itself is a name")
        #expect(
            m.activation
                == ActivationRule(
                    text: true, urls: 1, images: 3, contentTypes: [.init(type: "application/pdf", max: 1), .init(type: "video/*", max: 2)]))
        #expect(try parseManifest(minimal()).get().activation == nil)
    }

    @Test(arguments: [
        (#", "activation": {"urls": -1}"#, "activation.urls"),
        (#", "activation": {"urls": 1.5}"#, "activation.urls"),
        (#", "activation": {"pictures": 1}"#, "activation.pictures"),
        (#", "activation": {"contentTypes": [{"type": "pdf"}]}"#, "activation.contentTypes[0].type"),
        (#", "activation": {"contentTypes": [{"type": "a/b", "max": 1}, {"type": "a/b"}]}"#, "activation.contentTypes[1].type"),
        (#", "activation": {"contentTypes": [{"type": "a/b", "count": 1}]}"#, "activation.contentTypes[0].count"),
        (#", "displayName": """#, "displayName"),
        (#", "displayName": "tab\there""#, "displayName"),
        (#", "displayName": "del\u007f""#, "displayName"),
        (#", "displayName": "next line\u0085""#, "displayName"),
        (#", "displayName": "\u202eevil""#, "displayName"),
        (#", "displayName": "isolate\u2067""#, "displayName"),
    ])
    func badActivationIsRefusedNamingTheField(extra: String, field: String) {
        guard case .failure(let e) = parseManifest(minimal(extra)) else {
            Issue.record("accepted: \(extra)")
            return
        }
        #expect(e.field == field, "\(e)")
    }

    @Test func discoveryListsWhatThePeerMayOpenOfThePointThatAcceptsTheContent() throws {
        let stranger = PeerIdentity(pid: 7, uid: 2000, gid: 2000)
        func share(_ id: String, _ rule: ActivationRule?, hosts: HostRestriction = HostRestriction(uids: [2000])) -> Manifest {
            var m = manifest(id, hosts: hosts)
            m.point = "share"
            m.activation = rule
            m.displayName = id.uppercased()
            return m
        }
        var widget = manifest("com.example.widget", hosts: HostRestriction(uids: [2000]))
        widget.point = "widget"
        widget.activation = ActivationRule(urls: 5)
        let manifests = [
            share("com.example.b.urls", ActivationRule(urls: 1)),
            share("com.example.a.images", ActivationRule(urls: 1, images: 3)),
            share("com.example.c.private", ActivationRule(urls: 1, images: 3), hosts: HostRestriction()),
            share("com.example.d.norule", nil),
            widget,
        ]
        let sup = Supervisor(manifests: manifests, limits: testLimits(), now: .seconds(0))
        let urlAndImages = try Self.content(["url": 1, "image": 3])
        #expect(sup.discover(point: "share", content: urlAndImages, peer: stranger).map(\.id) == ["com.example.a.images"])
        #expect(
            sup.discover(point: "share", content: urlAndImages, peer: ownPeer).map(\.id) == ["com.example.a.images", "com.example.c.private"],
            "the daemon's uid may open every extension")
        #expect(
            sup.discover(point: "share", content: try Self.content(["url": 1]), peer: stranger).map(\.id)
                == ["com.example.a.images", "com.example.b.urls"], "sorted by id")
        #expect(
            sup.discover(point: "share", content: try Self.content([:]), peer: stranger).map(\.id)
                == ["com.example.a.images", "com.example.b.urls", "com.example.d.norule"], "no content: every share extension it may open")
        #expect(
            sup.discover(point: "", content: try Self.content(["url": 1]), peer: stranger).map(\.id)
                == ["com.example.a.images", "com.example.b.urls", "com.example.widget"], "no point: every point")
        #expect(sup.discover(point: "action", content: try Self.content([:]), peer: stranger).isEmpty)
    }
}
