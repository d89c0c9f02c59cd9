import ExtensionProtocol

/// Which secret items a caller may see and in which group it adds (docs/secrets.md): its groups
/// are its app's (`groups` of the app manifest), in their declared order; an item of any other
/// group does not exist for it. Pure: the shell gives the caller's app.
public enum SecretAccess {
    /// The groups of the app `app` (none for a caller of no app, administrators included).
    public static func groups(of app: String?, apps: [String: AppManifest]) -> [String] {
        app.flatMap { apps[$0]?.groups } ?? []
    }

    /// The group an add goes to: the one it names, if the caller may use it; the caller's
    /// first otherwise. Nil, with the refusal, when it may not add.
    public static func addGroup(_ asked: String, callerGroups: [String]) -> Result<String, SecretRefusal> {
        guard let first = callerGroups.first else {
            return .failure(SecretRefusal(.notPermitted, "the caller belongs to no app with groups: it has no secret access group"))
        }
        if asked.isEmpty { return .success(first) }
        guard callerGroups.contains(asked) else { return .failure(SecretRefusal(.notPermitted, "'\(asked)' is not one of the caller's groups")) }
        return .success(asked)
    }

    /// What is wrong with `attributes` for an add, or nil.
    public static func addProblem(_ attributes: SecretAttributes, dataCount: Int) -> String? {
        if attributes.itemClass == .any { return "an item needs a class: generic or internet password" }
        if dataCount == 0 { return "an item needs data (1 to \(WireLimits.maxSecret) bytes)" }
        switch attributes.itemClass {
        case .genericPassword:
            if attributes.server != nil || attributes.protocol != nil || attributes.port != nil || attributes.path != nil {
                return "a generic password has service and account, not server, protocol, port or path"
            }
        case .internetPassword:
            if attributes.service != nil { return "an internet password has server, account, protocol, port and path, not service" }
        case .any: break
        }
        return nil
    }

    /// Whether an item in `group` described by `item` is one `query` finds for a caller of
    /// `callerGroups`: its group is the caller's (and the query's, if it names one), and every
    /// attribute the query gives is equal.
    public static func finds(_ query: SecretAttributes, item: SecretAttributes, callerGroups: [String]) -> Bool {
        guard callerGroups.contains(item.group), query.group.isEmpty || query.group == item.group else { return false }
        return item.matches(query)
    }
}

/// Why a secret operation was refused: a failure code and a text for people.
public struct SecretRefusal: Error, Equatable, Sendable {
    /// The code.
    public var code: FailureCode
    /// Why.
    public var text: String
    /// A refusal with this code and text.
    public init(_ code: FailureCode, _ text: String) {
        self.code = code
        self.text = text
    }
}
